"""numba.cuda kernels for `minimal`: the linear-recurrence scan and GRIL's windowed cross-product.

A backend the library imports by name, only when backend="cuda" asks for it (``minimal.scan.checks.cuda_module``);
it depends on numpy, numba.cuda and ``minimal.cells.gril.n_windows`` (the one definition of GRIL's window count,
imported by ``window.py``). Tested in the numba.cuda simulator (``NUMBA_ENABLE_CUDASIM=1``); see README.md in this
folder.

    scan.linear_scan(a, b, h0=None, method="blelloch") -> h   (method: "sequential" v1, "blelloch" v2,
                                                              "chunked" v3 in chunked.py, opt-in,
                                                              "lookback" v4 in lookback.py, "auto")
    scan.linear_scan_backward(a, h, dh, h0=None, method="blelloch") -> (da, db, dh0)
    scan.log_linear_scan(log_a, log_b, log_h0=None) -> log h
    scan.log_linear_scan_backward(log_a, log_b, log_h, dlog_h, log_h0=None) -> (dlog_a, dlog_b, dlog_h0)
    window.gril_forward(...), window.gril_backward(...)   GRIL's Z_t = A ⊙ Z_{t-1} + C_t Q C_t^T

Timing them is measurement, not kernels: ``minimal.bench.gpu`` (``python -m minimal.bench.gpu scan|window``) and
the prepared GPU checks ``minimal.bench.gpu_check`` / ``minimal.bench.gpu_round2``.
"""
from .scan import linear_scan, linear_scan_backward, log_linear_scan, log_linear_scan_backward

__all__ = ["linear_scan", "linear_scan_backward", "log_linear_scan", "log_linear_scan_backward"]
