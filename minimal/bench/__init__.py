"""Measurement, apart from the library: ``kernels`` times the scans, GRIL's block and the gated RNN's step against a
same-run memory copy (``python -m minimal bench scan|window|step``); ``train`` times one training step of every model
the course trains (``python -m minimal bench train``), beside the PyTorch twins of ``torch_models`` when torch is
installed. Nothing in the library imports this package."""
