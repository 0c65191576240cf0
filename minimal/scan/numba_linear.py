"""Numba kernels of the linear scan, the default behind ``linear_scan`` (``linear.py`` beside this file holds the
NumPy reference they are tested against). Private: call them through ``minimal.scan``.

Every kernel takes C-contiguous (B, T, C) arrays (``minimal.scan`` flattens the trailing axes into C) and
(B, C) initial states of one dtype (float32 or float64), and writes into output arrays passed in (``*_into``),
so that a benchmark can time the scan apart from the page faults of fresh allocations; the plain-named
wrappers allocate the outputs. Time is the outer loop and the contiguous channel axis the inner one, so each
step is a vectorisable sweep over C: a scan along a strided axis is latency-bound instead (measured here).
One thread: ``prange`` gave no speedup on the project's CPUs (measured here), so batch rows run one after
another.

The backward kernels check NaN and inf on their outputs, in the pass that writes them: every value the adjoint
reads reaches an output through a sum or a product (g_t = dh_t + a_{t+1} g_{t+1}, da_t = g_t h_{t-1},
dh0 = a_0 g_0), and a NaN or inf survives both (an infinite x times 0 is NaN), in the loop's order and in the
tree's. The one input value never read, h at the last step, is checked apart (B C values).

The Blelloch kernel serves both directions. The forward scans steps t = 0 .. T-1 with coefficients a_t. The
backward's adjoint g_t = dh_t + a_{t+1} g_{t+1} is the same scan run over j = 0 .. T-1 with time t = T-1-j
and coefficient a_{t+1}; ``reverse=True`` maps indices that way instead of copying reversed, shifted arrays.
"""
from __future__ import annotations

import numpy as np
from numba import njit


# ---------------------------------------------------------------------------------------------------------
# sequential
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True)
def sequential_into(a, b, h0, h):
    """h_t = a_t h_{t-1} + b_t. a, b: (B, T, C); h0: (B, C); writes h: (B, T, C).

    The state h_{t-1} is carried in a (C,) buffer that stays in L1 instead of being read back from h: the
    loop then only streams a, b in and h out, like ``np.add(a, b, out=h)``, and ran faster than reading h[i, t-1]
    (same arithmetic, bit-identical results; timed once at (16, 4096, 256) float32, ``python -m minimal bench
    scan`` times the loop as it is)."""
    B, T, C = a.shape
    prev = np.empty(C, dtype=h.dtype)
    for i in range(B):
        for c in range(C):
            prev[c] = h0[i, c]
        for t in range(T):
            for c in range(C):
                v = a[i, t, c] * prev[c] + b[i, t, c]
                prev[c] = v
                h[i, t, c] = v


def sequential(a, b, h0):
    h = np.empty_like(b)
    sequential_into(a, b, h0, h)
    return h


@njit(cache=True)
def sequential_into_checked(a, b, h0, h):
    """``sequential_into``, returning whether every h_t is finite (the public ``linear_scan``'s NaN/inf check).

    NaN and inf are absorbing in this recurrence (IEEE arithmetic; these kernels use no fastmath): a
    non-finite h_{t-1} gives a non-finite a_t h_{t-1} (inf * 0 is NaN), and a non-finite term makes the sum
    non-finite (inf - inf is NaN); a NaN or inf in a_t, b_t or h0 makes h_t non-finite the same way. So every
    h is finite exactly when the last step's states h[:, T-1, :] are: the scan itself accumulates the flag,
    and the check reads B*C values instead of two extra passes over a and b.
    """
    sequential_into(a, b, h0, h)
    B, T, C = h.shape
    for i in range(B):
        for c in range(C):
            if not np.isfinite(h[i, T - 1, c]):
                return False
    return True


@njit(cache=True, inline="always")
def _flag_row(h, i, bad):
    """0 * h[i, T-1, :] into ``bad``: the one input value the adjoint never reads (module docstring)."""
    T = h.shape[1]
    for c in range(h.shape[2]):
        bad[c] += 0.0 * h[i, T - 1, c]


@njit(cache=True, inline="always")
def all_zero(bad):
    for c in range(bad.shape[0]):
        if bad[c] != 0.0:
            return False
    return True


@njit(cache=True, fastmath={"reassoc"})
def sequential_backward(a, h, dh, h0):
    """Reverse-time adjoint in one pass. a, h, dh: (B, T, C); h0: (B, C). Returns (da, db, dh0, finite).

    g_t = dh_t + a_{t+1} g_{t+1}; db_t = g_t; da_t = g_t h_{t-1} (h_{-1} = h0); dh0 = a_0 g_0.
    ``finite``: whether every input and output is finite, read off the outputs (module docstring).

    The flag is one scalar sum of 0 * (each output) and 0 * h[:, T-1] (``_flag_row``), reassociated
    (``fastmath`` "reassoc", the only flag: a NaN or inf still makes the sum NaN) so that it vectorises; a
    (C,) accumulator array written in the same loop as da and db kept the loop scalar (several times slower at
    (64, 32, 192), timed once). The recurrence has one add per element, so the outputs are those of
    the strict order.
    """
    B, T, C = a.shape
    da = np.empty_like(a)
    db = np.empty_like(a)
    dh0 = np.empty_like(h0)
    acc = 0.0
    for i in range(B):
        for c in range(C):
            db[i, T - 1, c] = dh[i, T - 1, c]
        for t in range(T - 2, -1, -1):
            for c in range(C):
                db[i, t, c] = dh[i, t, c] + a[i, t + 1, c] * db[i, t + 1, c]
        for t in range(1, T):
            for c in range(C):
                x = db[i, t, c] * h[i, t - 1, c]
                da[i, t, c] = x
                acc += 0.0 * x + 0.0 * db[i, t, c]
        for c in range(C):
            x = db[i, 0, c] * h0[i, c]
            da[i, 0, c] = x
            dh0[i, c] = a[i, 0, c] * db[i, 0, c]
            acc += 0.0 * x + 0.0 * db[i, 0, c] + 0.0 * dh0[i, c] + 0.0 * h[i, T - 1, c]
    return da, db, dh0, acc == 0.0


# ---------------------------------------------------------------------------------------------------------
# Blelloch (work-efficient up-sweep / down-sweep)
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _time(j, T, reverse):
    """Time index of scan position j."""
    return T - 1 - j if reverse else j


@njit(cache=True, inline="always")
def _coef_time(j, T, reverse):
    """Time index of the coefficient of scan position j (the backward's coefficient is a_{t+1})."""
    return T - j if reverse else j


@njit(cache=True)
def _blelloch(a, b, h0, x, scratch, reverse):
    """Inclusive scan of the pairs (A_j, x_j) over positions j = 0 .. T-1, for every row and channel.

    a: (B, T, C) coefficients (position j reads a[:, _coef_time(j)]; position 0's coefficient only multiplies
       the initial state, so the backward, where it would be a_T, never reads it).
    b: (B, T, C) the inputs b (dh in the backward); x: (B, T, C) receives h (g in the backward).
    h0: (B, C) initial state, folded into position 0 as b_0 <- a_0 h0 + b_0; ignored when reverse.
    scratch: (T // 2, C) products of a over the ranges the up-sweep forms. A range always ends at an
       odd position j (slot j // 2); even positions only ever need their own coefficient, read from a.
    The channel loops always run over range(C): a loop over a sub-range of channels (a tile) made Numba keep
    its negative-index checks and the loop was no longer vectorised (several times slower, timed once).

    Up-sweep, d = 1, 2, 4, ...: position k = 2d-1, 4d-1, ... absorbs position k-d: with the range (k-2d, k]
        A_k <- A_{k-d} A_k,  x_k <- A_k x_{k-d} + x_k   (x_k uses the old A_k: a2 b1 + b2).
    Level d = 1 reads b and writes x, so there is no separate copy of b into x.
    Down-sweep, d = ..., 2, 1: position k = 3d-1, 5d-1, ... (range (k-d, k]) absorbs the finished prefix
    at k-d: x_k <- A_k x_{k-d} + x_k. Prefix products of a are never needed, so A is not updated there.
    """
    B, T, C = x.shape
    for i in range(B):
        # up-sweep, d = 1, reading b. Position 0 first: it carries h0 and has no range product.
        t0 = _time(0, T, reverse)
        if reverse:
            for c in range(C):
                x[i, t0, c] = b[i, t0, c]
        else:
            for c in range(C):
                x[i, 0, c] = a[i, 0, c] * h0[i, c] + b[i, 0, c]
        if T > 1:
            t1, ct1 = _time(1, T, reverse), _coef_time(1, T, reverse)
            for c in range(C):
                x[i, t1, c] = a[i, ct1, c] * x[i, t0, c] + b[i, t1, c]
                scratch[0, c] = 0.0  # the range [0, 1] is never a right operand
        for k in range(3, T, 2):
            tk, tl = _time(k, T, reverse), _time(k - 1, T, reverse)
            ck, cl = _coef_time(k, T, reverse), _coef_time(k - 1, T, reverse)
            s = k // 2
            for c in range(C):
                bl = b[i, tl, c]
                x[i, tl, c] = bl
                x[i, tk, c] = a[i, ck, c] * bl + b[i, tk, c]
                scratch[s, c] = a[i, cl, c] * a[i, ck, c]
        if T % 2 == 1 and T > 1:  # the last position has no partner at d = 1
            tl = _time(T - 1, T, reverse)
            for c in range(C):
                x[i, tl, c] = b[i, tl, c]
        # up-sweep, d >= 2: both ranges end at odd positions, so both products are in scratch
        d = 2
        while d < T:
            for k in range(2 * d - 1, T, 2 * d):
                tk, tl = _time(k, T, reverse), _time(k - d, T, reverse)
                sk, sl = k // 2, (k - d) // 2
                for c in range(C):
                    x[i, tk, c] += scratch[sk, c] * x[i, tl, c]
                    scratch[sk, c] *= scratch[sl, c]
            d *= 2
        # down-sweep, d >= 2: k = 3d-1 mod 2d is odd, its range product is in scratch
        d //= 2
        while d >= 2:
            for k in range(3 * d - 1, T, 2 * d):
                tk, tl = _time(k, T, reverse), _time(k - d, T, reverse)
                sk = k // 2
                for c in range(C):
                    x[i, tk, c] += scratch[sk, c] * x[i, tl, c]
            d //= 2
        # down-sweep, d = 1: even positions k >= 2, ranges of one step
        for k in range(2, T, 2):
            tk, tl = _time(k, T, reverse), _time(k - 1, T, reverse)
            ck = _coef_time(k, T, reverse)
            for c in range(C):
                x[i, tk, c] += a[i, ck, c] * x[i, tl, c]


@njit(cache=True)
def blelloch_into(a, b, h0, h, scratch):
    """Blelloch scan of h_t = a_t h_{t-1} + b_t. a, b: (B, T, C); h0: (B, C); writes h: (B, T, C);
    scratch: (T // 2, C) work space (``scratch_for(a)``)."""
    _blelloch(a, b, h0, h, scratch, False)


@njit(cache=True)
def all_finite(x):
    """Whether a (B, T, C) array holds no NaN or inf: one read, vectorised over C (x * 0 is 0 for a finite x
    and NaN otherwise, and a NaN stays in its channel's sum)."""
    B, T, C = x.shape
    acc = np.zeros(C, dtype=x.dtype)
    for i in range(B):
        for t in range(T):
            for c in range(C):
                acc[c] += x[i, t, c] * 0.0
    for c in range(C):
        if acc[c] != 0.0:
            return False
    return True


@njit(cache=True)
def blelloch_into_checked(a, b, h0, h, scratch):
    """``blelloch_into``, returning whether every h_t is finite. The tree does not carry a NaN or inf to the
    last step as the loop does (an overflowed prefix can be multiplied by a_t = 0 in another order), so the
    check is one pass over h after the scan: still one read of h instead of a read of a and of b."""
    _blelloch(a, b, h0, h, scratch, False)
    return all_finite(h)


def scratch_for(a):
    """Work space of the Blelloch kernels for a (B, T, C) problem: one row's range products."""
    return np.empty((max(a.shape[1] // 2, 1), a.shape[2]), dtype=a.dtype)


def blelloch(a, b, h0):
    h = np.empty_like(b)
    blelloch_into(a, b, h0, h, scratch_for(a))
    return h


@njit(cache=True)
def _blelloch_backward(a, h, dh, h0, scratch, da, g, dh0):
    B, T, C = a.shape
    _blelloch(a, dh, h0, g, scratch, True)
    bad = np.zeros(C, dtype=np.float64)
    for i in range(B):
        _flag_row(h, i, bad)
        for c in range(C):
            da[i, 0, c] = g[i, 0, c] * h0[i, c]
            dh0[i, c] = a[i, 0, c] * g[i, 0, c]
            bad[c] += 0.0 * da[i, 0, c] + 0.0 * g[i, 0, c] + 0.0 * dh0[i, c]
        for t in range(1, T):
            for c in range(C):
                da[i, t, c] = g[i, t, c] * h[i, t - 1, c]
                bad[c] += 0.0 * da[i, t, c] + 0.0 * g[i, t, c]
    return all_zero(bad)


def blelloch_backward(a, h, dh, h0):
    """Adjoint by the Blelloch scan in reverse time. a, h, dh: (B, T, C); h0: (B, C). Returns (da, db, dh0,
    finite) as ``sequential_backward``."""
    da, g, dh0 = np.empty_like(a), np.empty_like(a), np.empty_like(h0)
    finite = _blelloch_backward(a, h, dh, h0, scratch_for(a), da, g, dh0)
    return da, g, dh0, finite
