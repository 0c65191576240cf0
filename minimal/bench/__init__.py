"""Measurement, apart from the library: ``kernels`` times the scans and GRIL's block against a same-run memory copy
(``python -m minimal bench scan|window``), ``step`` the gated RNN's step (``python -m minimal bench step``); ``train``
times one training step of every model the course trains (``python -m minimal bench train``), beside the PyTorch twins
of ``torch_models`` when torch is installed; ``cli`` is the bench command's parser and handler. The GPU kernels of
``cuda_kernels`` are timed here too: ``gpu`` (``python -m minimal.bench.gpu scan|window|dispatch``, or ``python -m
minimal bench scan|window --backend cuda``) with its bookkeeping in ``gpu_rows``, and the prepared GPU checks
``gpu_check`` and ``gpu_round2`` (run by ``bench/gpu_check.sh``, ``bench/gpu_check2.sh``, ``bench/gpu_round2.sh``).
Nothing in the library imports this package (the command line does)."""
