"""Numba kernels behind ``minimal.scan`` (backend="numba"). Private: call them through ``minimal.scan``.

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
def _all_zero(bad):
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
    return _all_zero(bad)


def blelloch_backward(a, h, dh, h0):
    """Adjoint by the Blelloch scan in reverse time. a, h, dh: (B, T, C); h0: (B, C). Returns (da, db, dh0,
    finite) as ``sequential_backward``."""
    da, g, dh0 = np.empty_like(a), np.empty_like(a), np.empty_like(h0)
    finite = _blelloch_backward(a, h, dh, h0, scratch_for(a), da, g, dh0)
    return da, g, dh0, finite


# ---------------------------------------------------------------------------------------------------------
# log space
# ---------------------------------------------------------------------------------------------------------

# exp and log1p from multiply-adds and selects only, so that LLVM vectorises the sweep over C: NumPy's and
# libm's exp / log1p are scalar calls here, and SVML, which would vectorise them, needs an
# llvmlite built with Intel's patch (``python -m numba -s``: "llvmlite Using SVML Patched LLVM: False" for the
# PyPI wheels). Both are accurate to a few ulp in float64 (tests/test_scan.py checks them against NumPy).
_LN2_HI = 6.93147180369123816490e-01   # ln 2 split (fdlibm): k * _LN2_HI is exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
_TWO52 = 4503599627370496.0          # 2^52
_TWO52_BITS = np.int64(0x4330000000000000)  # its bit pattern


@njit(cache=True, inline="always")
def exp_nonpositive(x):
    """exp(x) for -708 <= x <= 0 to a few ulp; x > 0 is taken as 0 (exp = 1: these exps are shares of a sum,
    in [0, 1], whose arguments are differences of logs that rounding can push just above 0), and x < -708
    gives 0 (an absolute error < 3.3e-308).

    x = k ln 2 + r with k = round(x / ln 2), 0 <= -k <= 1021 (so 2^k is a normal number), and |r| <= ln 2 / 2
    (Cody-Waite: r keeps full precision); exp(r) from its Taylor series to r^13 (remainder < 1e-17 relative);
    exp(x) = 2^k exp(r). A NaN x gives NaN."""
    x = min(x, 0.0)
    k = np.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    # Estrin's scheme for sum_{n<=13} r^n / n!: a tree of multiply-adds four deep, where Horner's rule is a chain
    # of 13 that leaves the vector units waiting on each multiply-add's latency (slower when timed)
    r2 = r * r
    r4 = r2 * r2
    p = (((1.0 + r) + r2 * (1.0 / 2.0 + r * (1.0 / 6.0)))
         + r4 * ((1.0 / 24.0 + r * (1.0 / 120.0)) + r2 * (1.0 / 720.0 + r * (1.0 / 5040.0)))
         + r4 * r4 * (((1.0 / 40320.0 + r * (1.0 / 362880.0)) + r2 * (1.0 / 3628800.0 + r * (1.0 / 39916800.0)))
                      + r4 * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0))))
    # 2^k from its bits: 2^52 + (k + 1023) holds k + 1023 in its low mantissa bits (exact, an integer below
    # 2^52), which a shift moves into the exponent field. Bit casts only: no float -> int conversion.
    biased = np.float64(k + (_TWO52 + 1023.0)).view(np.int64) - _TWO52_BITS
    scale = np.int64(biased << 52).view(np.float64)
    return 0.0 if x < -708.0 else p * scale


@njit(cache=True, inline="always")
def log1p_unit(e):
    """log(1 + e) for 0 <= e <= 1: 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with s = e / (2 + e) <= 1/3,
    summed to s^31 (remainder < 2e-17 relative)."""
    s = e / (2.0 + e)
    # Estrin's scheme, as in exp_nonpositive, for sum_{n<=15} z^n / (2n + 1) with z = s^2
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    p = (((1.0 + z * (1.0 / 3.0)) + z2 * (1.0 / 5.0 + z * (1.0 / 7.0)))
         + z4 * ((1.0 / 9.0 + z * (1.0 / 11.0)) + z2 * (1.0 / 13.0 + z * (1.0 / 15.0)))
         + z4 * z4 * (((1.0 / 17.0 + z * (1.0 / 19.0)) + z2 * (1.0 / 21.0 + z * (1.0 / 23.0)))
                      + z4 * ((1.0 / 25.0 + z * (1.0 / 27.0)) + z2 * (1.0 / 29.0 + z * (1.0 / 31.0)))))
    return 2.0 * s * p


@njit(cache=True, inline="always")
def _logaddexp(x, y):
    """log(e^x + e^y) = max(x, y) + log1p(exp(-|x - y|)), vectorisable (above)."""
    m = max(x, y)
    return m + log1p_unit(exp_nonpositive(-abs(x - y)))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def log_scan_into(log_a, log_b, log_h0, has_h0, log_h):
    """log h_t = logaddexp(log a_t + log h_{t-1}, log b_t). (B, T, C) arrays; log_h0: (B, C), ignored
    (h0 = 0) unless has_h0; writes log_h. Returns whether every input and output was finite.

    The check rides in the scan's own pass: ``bad[c]`` accumulates 0 * log a + 0 * log b + 0 * log h (and
    0 * log h0), which is 0 for finite numbers and NaN otherwise, so it costs no extra read. The inputs are
    checked too (for the linear scan the last step's output is enough): a log a of -inf makes that step's
    output finite again.

    ~100 floating-point operations per element (the vectorised exp and log1p above): compute-bound, 0.13 of a
    same-run copy's bandwidth where the same loop on libm's scalar exp and log1p reached 0.03."""
    B, T, C = log_a.shape
    # The carry is float64 whatever the dtype: a float32 log h near 7 has a resolution of 5e-7, and the
    # rounding of every step would otherwise accumulate over the ~1/(1-a) steps the state remembers.
    prev = np.empty(C, dtype=np.float64)
    bad = np.zeros(C, dtype=np.float64)
    for i in range(B):
        for c in range(C):
            la = np.float64(log_a[i, 0, c])
            lb = np.float64(log_b[i, 0, c])
            if has_h0:
                l0 = np.float64(log_h0[i, c])
                bad[c] += 0.0 * l0
                prev[c] = _logaddexp(la + l0, lb)
            else:
                prev[c] = lb
            bad[c] += 0.0 * la + 0.0 * lb + 0.0 * prev[c]
            log_h[i, 0, c] = prev[c]
        for t in range(1, T):
            for c in range(C):
                la = np.float64(log_a[i, t, c])
                lb = np.float64(log_b[i, t, c])
                v = _logaddexp(la + prev[c], lb)
                bad[c] += 0.0 * la + 0.0 * lb + 0.0 * v
                prev[c] = v
                log_h[i, t, c] = v
    return _all_zero(bad)


def log_scan(log_a, log_b, log_h0):
    """log h_t = logaddexp(log a_t + log h_{t-1}, log b_t). (B, T, C) arrays; log_h0: (B, C) or None (h0 = 0).
    Returns (log_h, whether every input and output was finite)."""
    has_h0 = log_h0 is not None
    if not has_h0:
        log_h0 = np.zeros((log_a.shape[0], log_a.shape[2]), dtype=log_a.dtype)
    log_h = np.empty_like(log_b)
    return log_h, log_scan_into(log_a, log_b, log_h0, has_h0, log_h)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, has_h0):
    """The reverse pass of ``log_scan_backward``; also returns whether every input and every G_t was finite
    (checked in the same pass, as in ``log_scan_into``; with every G_t finite so are the outputs, since the
    shares are in [0, 1])."""
    B, T, C = log_a.shape
    dlog_a = np.empty_like(log_a)
    dlog_b = np.empty_like(log_a)
    dlog_h0 = np.empty_like(log_h0)
    # float64 carries, as in the forward
    G = np.empty(C, dtype=np.float64)
    w_next = np.empty(C, dtype=np.float64)  # w_{t+1}, the adjoint's coefficient
    bad = np.zeros(C, dtype=np.float64)
    for i in range(B):
        for c in range(C):
            G[c] = 0.0
            w_next[c] = 0.0
            if has_h0:
                bad[c] += 0.0 * np.float64(log_h0[i, c])
        for t in range(T - 1, -1, -1):
            # l_{t-1}: the row before, or log h0 at t = 0 (w_0 = 0 without h0). Chosen once per row: a branch on t
            # inside the loop over c kept that loop scalar (2.6x slower at (64, 64, 192) float32, same values)
            l_prev = log_h[i, t - 1] if t > 0 else log_h0[i]
            has_prev = t > 0 or has_h0
            for c in range(C):
                la = np.float64(log_a[i, t, c])
                lb = np.float64(log_b[i, t, c])
                l_t = np.float64(log_h[i, t, c])
                dl = np.float64(dlog_h[i, t, c])
                bad[c] += 0.0 * la + 0.0 * lb + 0.0 * l_t + 0.0 * dl
                # 1. G_t = dlog_h_t + w_{t+1} G_{t+1}
                G[c] = dl + w_next[c] * G[c]
                bad[c] += 0.0 * G[c]
                # 2. the shares w_t = exp(log a_t + l_{t-1} - l_t), v_t = exp(log b_t - l_t), both <= 0 in exact
                # arithmetic (a rounding above 0 is taken as exp(0) = 1)
                w = exp_nonpositive(la + np.float64(l_prev[c]) - l_t)
                w = w if has_prev else 0.0
                v = exp_nonpositive(lb - l_t)
                # 3. distribute
                dlog_a[i, t, c] = w * G[c]
                dlog_b[i, t, c] = v * G[c]
                w_next[c] = w
        for c in range(C):
            dlog_h0[i, c] = w_next[c] * G[c]
    return dlog_a, dlog_b, dlog_h0, _all_zero(bad)


def log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0):
    """VJP of ``log_scan`` (see ``minimal.scan.log_scan_backward``). Returns (dlog_a, dlog_b, dlog_h0, whether
    every input and output was finite)."""
    has_h0 = log_h0 is not None
    if not has_h0:
        log_h0 = np.zeros((log_a.shape[0], log_a.shape[2]), dtype=log_a.dtype)
    return _log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, has_h0)
