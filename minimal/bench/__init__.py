"""Measurement, apart from the library: ``kernels`` times the scans and GRIL's block against a same-run memory copy
(``python -m minimal bench scan|window``), ``step`` the gated RNN's step (``python -m minimal bench step``); ``train``
times one training step of every model the course trains (``python -m minimal bench train``), beside the PyTorch twins
of ``torch_models`` when torch is installed; ``cli`` is the bench command's parser and handler. Nothing in the library
imports this package (the command line does)."""
