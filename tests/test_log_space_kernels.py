"""The compiled log-space kernels (``minimal.scan.numba_log._log_scan_backward``, ``minimal.cells._gates_numba._g_and_log_g``)
give the values of their plain forms, kept here as compiled references: the adjoint with the choice of l_{t−1}
made per element (a branch on t inside the loop over channels), and log g(k) with both branches' log1p evaluated
and one kept. The fast forms choose l_{t−1} once per row and take one log1p of a selected argument."""
import numpy as np
import pytest
from numba import njit

from minimal.cells import _gates_numba as gn
from minimal.scan import numba_log as sn
from minimal.scan.numba_log import exp_nonpositive, log1p_unit


@njit(error_model="numpy", fastmath={"contract"})
def _adjoint_per_element(log_a, log_b, log_h, dlog_h, log_h0, has_h0):
    """G_t = dlog_h_t + w_{t+1} G_{t+1}; dlog a_t = w_t G_t, dlog b_t = v_t G_t, dlog h0 = w_0 G_0, with
    w_t = exp(log a_t + l_{t−1} − l_t) (w_0 = 0 without h0) and v_t = exp(log b_t − l_t), l_{t−1} picked per element."""
    B, T, C = log_a.shape
    dlog_a, dlog_b, dlog_h0 = np.empty_like(log_a), np.empty_like(log_a), np.empty_like(log_h0)
    G = np.empty(C, dtype=np.float64)
    w_next = np.empty(C, dtype=np.float64)
    for i in range(B):
        G[:] = 0.0
        w_next[:] = 0.0
        for t in range(T - 1, -1, -1):
            for c in range(C):
                la, lb = np.float64(log_a[i, t, c]), np.float64(log_b[i, t, c])
                l_t, dl = np.float64(log_h[i, t, c]), np.float64(dlog_h[i, t, c])
                G[c] = dl + w_next[c] * G[c]
                if t > 0:
                    w = exp_nonpositive(la + np.float64(log_h[i, t - 1, c]) - l_t)
                elif has_h0:
                    w = exp_nonpositive(la + np.float64(log_h0[i, c]) - l_t)
                else:
                    w = 0.0
                v = exp_nonpositive(lb - l_t)
                dlog_a[i, t, c] = w * G[c]
                dlog_b[i, t, c] = v * G[c]
                w_next[c] = w
        for c in range(C):
            dlog_h0[i, c] = w_next[c] * G[c]
    return dlog_a, dlog_b, dlog_h0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("T", [1, 2, 7, 64])
def test_the_log_scan_adjoint_equals_its_per_element_form_bit_for_bit(rng, dtype, with_h0, T):
    B, C = 3, 37                                   # C not a multiple of a vector width: the loop's tail runs too
    log_a = (-np.abs(rng.standard_normal((B, T, C))) - 0.05).astype(dtype)
    log_b = (2.0 * rng.standard_normal((B, T, C)) - 1.0).astype(dtype)
    log_h0 = rng.standard_normal((B, C)).astype(dtype)
    dlog_h = rng.standard_normal((B, T, C)).astype(dtype)
    log_h, finite = sn.log_scan(log_a, log_b, log_h0 if with_h0 else None)
    assert finite
    h0_arg = log_h0 if with_h0 else np.zeros_like(log_h0)     # what ``log_scan_backward`` passes without h0
    *got, finite = sn._log_scan_backward(log_a, log_b, log_h, dlog_h, h0_arg, with_h0)
    want = _adjoint_per_element(log_a, log_b, log_h, dlog_h, h0_arg, with_h0)
    assert finite
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)
    if not with_h0:
        assert not got[0][:, 0].any() and not got[2].any()     # h0 = 0: w_0 = 0


@njit(error_model="numpy", fastmath={"contract"})
def _g_and_log_g_both_branches(k):
    g, log_g = np.empty_like(k), np.empty_like(k)
    for j in range(k.shape[0]):
        kh = np.float64(k[j])
        eh = exp_nonpositive(-abs(kh))
        pos = kh >= 0.0
        g[j] = kh + 0.5 if pos else eh / (1.0 + eh)
        log_g[j] = gn.log_normal(max(kh, 0.0) + 0.5) if pos else kh - log1p_unit(eh)
    return g, log_g


@njit(error_model="numpy", fastmath={"contract"})
def _g_and_log_g_fast(k):
    g, log_g = np.empty_like(k), np.empty_like(k)
    for j in range(k.shape[0]):
        g[j], log_g[j] = gn._g_and_log_g(np.float64(k[j]))
    return g, log_g


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale", [1.0, 30.0, 800.0])
def test_log_g_from_one_log1p_equals_both_branches_to_an_ulp(rng, dtype, scale):
    k = np.concatenate([scale * rng.standard_normal(4001), [0.0, -0.0, 0.5, -0.5, 1e-300, -1e-300]]).astype(dtype)
    g_fast, log_g_fast = _g_and_log_g_fast(k)
    g_ref, log_g_ref = _g_and_log_g_both_branches(k)
    np.testing.assert_array_equal(g_fast, g_ref)
    # the same log1p of the same argument; in float64 the sum e ln 2 + log1p may round once differently (where
    # the compiler fuses a multiply-add), so one ulp; stored as float32 the values are equal
    if dtype == np.float64:
        np.testing.assert_allclose(log_g_fast, log_g_ref, rtol=2.3e-16, atol=0)
    else:
        np.testing.assert_array_equal(log_g_fast, log_g_ref)
