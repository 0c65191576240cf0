"""`python -m minimal check`: gradient-check every registered cell and check every scan against the reference.

Each row is one example of one cell (``minimal.cells.REGISTRY``) or one scan method, with its parameter count,
the largest relative error over all parameters and the input (see ``minimal.gradcheck.rel_error``), and
whether it is within ``minimal.gradcheck.TOLERANCE``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from . import scan
from .gradcheck import TOLERANCE, check_cell, check_function, rel_error


class Row(NamedTuple):
    name: str
    n_params: int
    max_rel_error: float
    worst: str  # which parameter (or "x") gave the largest error
    seconds: float

    @property
    def passed(self):
        return bool(self.max_rel_error <= TOLERANCE)


def cell_rows(names=None, seed=0):
    """One Row per example of every registered cell (or of the cells in ``names``)."""
    from .cells import REGISTRY, get

    modules = {n: get(n) for n in names} if names else REGISTRY
    rows = []
    for name, module in modules.items():
        for ex in module.examples(np.random.default_rng(seed)):
            t0 = time.perf_counter()
            errors = check_cell(module, ex, seed=seed)
            worst = max(errors, key=errors.get)
            rows.append(Row(f"{name}/{ex.name}", ex.n_params(), errors[worst], worst,
                            time.perf_counter() - t0))
    return rows


def _scan_cases():
    """(label, method, backend) for every CPU scan implementation."""
    return [(f"scan/{backend}-{method}", method, backend)
            for backend, method in [("numpy", "blelloch"), ("numba", "sequential"), ("numba", "blelloch")]]


def scan_rows(seed=0, lengths=(1, 2, 3, 7, 64, 1000, 1025)):
    """Every scan method against the sequential reference (forward and backward), and the
    backward of the reference against finite differences."""
    rng = np.random.default_rng(seed)
    rows = []
    cases = [(T, rng.uniform(-1, 1, (2, T, 3)), rng.standard_normal((2, T, 3)), rng.standard_normal((2, 3)),
              rng.standard_normal((2, T, 3))) for T in lengths]
    for label, method, backend in _scan_cases():
        t0 = time.perf_counter()
        worst, where = 0.0, ""
        for T, a, b, h0, dh in cases:
            ref = scan.linear_scan(a, b, h0, method="sequential", backend="numpy")
            h = scan.linear_scan(a, b, h0, method=method, backend=backend)
            ref_grads = scan.linear_scan_backward(a, ref, dh, h0, method="sequential", backend="numpy")
            grads = scan.linear_scan_backward(a, h, dh, h0, method=method, backend=backend)
            for what, x, y in [("h", h, ref)] + list(zip(("da", "db", "dh0"), grads, ref_grads)):
                err = rel_error(x, y)
                if err >= worst:
                    worst, where = err, f"{what} T={T}"
        rows.append(Row(label, 0, worst, where, time.perf_counter() - t0))

    # The reference backward against central differences, with h0, on a short odd length.
    a, b, h0 = rng.uniform(-1, 1, (2, 5, 3)), rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 3))
    params = {"a": a, "b": b, "h0": h0}

    def forward(p, x):
        h = scan.linear_scan(p["a"], p["b"], p["h0"], method="sequential", backend="numpy")
        return h, h

    def backward(p, h, dh):
        da, db, dh0 = scan.linear_scan_backward(p["a"], h, dh, p["h0"], method="sequential", backend="numpy")
        return None, {"a": da, "b": db, "h0": dh0}

    t0 = time.perf_counter()
    errors = check_function(forward, backward, params, None)
    worst = max(errors, key=errors.get)
    rows.append(Row("scan/backward-vs-finite-differences", 0, errors[worst], worst, time.perf_counter() - t0))

    # The log-space scan against the linear scan, forward and backward through exp/log.
    a, b, h0 = rng.uniform(0.5, 1, (2, 9, 3)), rng.uniform(0.1, 1, (2, 9, 3)), rng.uniform(0.1, 1, (2, 3))
    t0 = time.perf_counter()
    log_h = scan.log_scan(np.log(a), np.log(b), np.log(h0))
    ref = scan.linear_scan(a, b, h0, method="sequential", backend="numpy")
    err = rel_error(np.exp(log_h), ref)
    rows.append(Row("scan/log-space-vs-linear", 0, err, "h", time.perf_counter() - t0))
    return rows


def format_table(rows):
    lines = [f"{'name':<44} {'params':>7} {'max rel error':>14}  {'worst':<16} {'result':<6}",
             "-" * 92]
    for r in rows:
        lines.append(f"{r.name:<44} {r.n_params:>7} {r.max_rel_error:>14.2e}  {r.worst:<16} "
                     f"{'pass' if r.passed else 'FAIL':<6}")
    n_fail = sum(not r.passed for r in rows)
    lines.append("-" * 92)
    lines.append(f"{len(rows) - n_fail} passed, {n_fail} failed (tolerance {TOLERANCE:g}, float64 central differences)")
    return "\n".join(lines)


def run(names=None, seed=0, scans=True):
    """Run all checks; return the rows (cells first, then scans)."""
    rows = cell_rows(names, seed)
    if scans:
        rows += scan_rows(seed)
    return rows
