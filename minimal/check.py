"""`python -m minimal check`: gradient-check every registered cell and check every scan against the reference.

Each row is one example of one cell (``minimal.cells.REGISTRY``) or one scan method, with its parameter count,
the largest relative error over all parameters and the input (see ``minimal.gradcheck.rel_error``), and
whether it is within the row's tolerance:

    TOLERANCE       1e-6    a backward against float64 central differences (``minimal.gradcheck``), which
                            carry O(eps^2) truncation and O(1e-16 / eps) rounding error themselves
    SCAN_TOLERANCE  1e-12   two exact methods computing the same scan in float64 (sequential, Blelloch,
                            log space): only rounding separates them
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from . import scan
from .gradcheck import TOLERANCE, check_cell, check_function, rel_error

SCAN_TOLERANCE = 1e-12  # two scan methods agree to rounding in float64


class Row(NamedTuple):
    name: str
    n_params: int
    max_rel_error: float
    worst: str  # which parameter (or "x") gave the largest error
    seconds: float
    tolerance: float = TOLERANCE  # finite differences; SCAN_TOLERANCE for two methods' agreement

    @classmethod
    def worst_of(cls, name, errors, t0, n_params=0, tolerance=TOLERANCE):
        """The row of the largest of ``errors`` ({where: relative error}), timed from ``t0``."""
        worst = max(errors, key=errors.get)
        return cls(name, n_params, errors[worst], worst, time.perf_counter() - t0, tolerance)

    @property
    def passed(self):
        return bool(self.max_rel_error <= self.tolerance)


def cell_rows(names=None, seed=0):
    """One Row per example of every registered cell (or of the cells in ``names``)."""
    from .cells import REGISTRY, get

    modules = {n: get(n) for n in names} if names else REGISTRY
    rows = []
    for name, module in modules.items():
        for ex in module.examples(np.random.default_rng(seed)):
            t0 = time.perf_counter()
            errors = check_cell(module, ex, seed=seed)
            rows.append(Row.worst_of(f"{name}/{ex.name}", errors, t0, ex.n_params()))
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
        rows.append(Row(label, 0, worst, where, time.perf_counter() - t0, SCAN_TOLERANCE))

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
    rows.append(Row.worst_of("scan/backward-vs-finite-differences", errors, t0))

    rows += _log_scan_rows(rng)
    return rows


_CPU_LOG_BACKENDS = ("numpy", "numba")


def _log_scan_rows(rng):
    """The log-space scan (both backends) against the linear scan, forward and backward, and its backward
    against central differences."""
    a, b, h0 = rng.uniform(0.5, 1, (2, 9, 3)), rng.uniform(0.1, 1, (2, 9, 3)), rng.uniform(0.1, 1, (2, 3))
    dh = rng.standard_normal(a.shape)
    log_a, log_b, log_h0 = np.log(a), np.log(b), np.log(h0)
    ref = scan.linear_scan(a, b, h0, method="sequential", backend="numpy")
    ref_grads = scan.linear_scan_backward(a, ref, dh, h0, method="sequential", backend="numpy")
    rows = []

    t0 = time.perf_counter()
    errors = {f"h {backend}": rel_error(np.exp(scan.log_scan(log_a, log_b, log_h0, backend)), ref)
              for backend in _CPU_LOG_BACKENDS}
    rows.append(Row.worst_of("scan/log-space-vs-linear", errors, t0, tolerance=SCAN_TOLERANCE))

    # Chain rule through h = exp(log h): a loss with dL/dh = dh has dL/dlog h = dh ⊙ h, and each log input
    # x gets dL/dlog x = x ⊙ dL/dx from the linear backward.
    t0 = time.perf_counter()
    errors = {}
    for backend in _CPU_LOG_BACKENDS:
        log_h = scan.log_scan(log_a, log_b, log_h0, backend)
        grads = scan.log_scan_backward(log_a, log_b, log_h, dh * np.exp(log_h), log_h0, backend)
        for what, g, x, g_ref in zip(("dlog_a", "dlog_b", "dlog_h0"), grads, (a, b, h0), ref_grads):
            errors[f"{what} {backend}"] = rel_error(g, x * g_ref)
    rows.append(Row.worst_of("scan/log-space-backward-vs-linear", errors, t0, tolerance=SCAN_TOLERANCE))

    t0 = time.perf_counter()
    errors = {}
    for backend in _CPU_LOG_BACKENDS:
        def forward(p, x):
            log_h = scan.log_scan(p["log_a"], p["log_b"], p["log_h0"], backend)
            return log_h, log_h

        def backward(p, log_h, dlog_h):
            dla, dlb, dlh0 = scan.log_scan_backward(p["log_a"], p["log_b"], log_h, dlog_h, p["log_h0"], backend)
            return None, {"log_a": dla, "log_b": dlb, "log_h0": dlh0}

        params = {"log_a": log_a.copy(), "log_b": log_b.copy(), "log_h0": log_h0.copy()}
        errors.update({f"{k} {backend}": e for k, e in check_function(forward, backward, params, None).items()})
    rows.append(Row.worst_of("scan/log-space-backward-vs-finite-differences", errors, t0))
    return rows


def format_table(rows):
    lines = [f"{'name':<46} {'params':>7} {'max rel error':>14} {'tolerance':>10}  {'worst':<16} {'result':<6}",
             "-" * 105]
    for r in rows:
        lines.append(f"{r.name:<46} {r.n_params:>7} {r.max_rel_error:>14.2e} {r.tolerance:>10.0e}  {r.worst:<16} "
                     f"{'pass' if r.passed else 'FAIL':<6}")
    n_fail = sum(not r.passed for r in rows)
    lines.append("-" * 105)
    lines.append(f"{len(rows) - n_fail} passed, {n_fail} failed (float64; tolerance {TOLERANCE:g} against "
                 f"central differences, {SCAN_TOLERANCE:g} between two scan methods)")
    return "\n".join(lines)


def run(names=None, seed=0, scans=True):
    """Run all checks; return the rows (cells first, then scans)."""
    rows = cell_rows(names, seed)
    if scans:
        rows += scan_rows(seed)
    return rows
