"""Running experiments: the training loop (``train``, with ``stopping``'s plateau rule and ``evaluations``), sweeps
on dask (``sweep``), ``--set`` overrides (``overrides``), the one writer of results and weights (``io``), the
``reproduce`` commands (``cli``: their parser and handler) and the results pages (``report``, ``verdicts``), and the
BLAS / malloc settings a timed run uses (``speed``). Everything here stands on the math below it (scans, cells,
layers, optim); nothing below imports it."""
