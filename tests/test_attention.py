"""Linear self-attention (Zucchet et al. Eq. 1) and causal softmax attention (transformer mode = RNN mode)."""
import numpy as np
import pytest

from minimal.cells import lsa, softmax_attention as sa
from minimal.gradcheck import TOLERANCE, backward_rel_errors, check_cell, rel_error

MODULES = {"lsa": lsa, "softmax_attention": sa}


# The float64 gradient checks and the float32 check of every example: tests/test_registry.py.


def test_examples_cover_T1_and_an_odd_T_in_every_mode():
    for module in MODULES.values():
        exs = module.examples(np.random.default_rng(0))
        for mode in module.MODES:
            Ts = {ex.x.shape[1] for ex in exs if ex.kwargs["mode"] == mode}
            assert 1 in Ts and any(T % 2 == 1 and T > 1 for T in Ts)


# ---------------------------------------------------------------- linear self-attention

@pytest.mark.parametrize("D_k,D_v", [(None, None), (2, 5)])
def test_lsa_parallel_form_equals_recurrent_form(rng, D_k, D_v):
    params = lsa.init(rng, 4, D_k, D_v)
    x = rng.standard_normal((3, 9, 4))
    y_par, c_par = lsa.forward(params, x)
    y_rec, c_rec = lsa.forward(params, x, mode="sequential")
    assert rel_error(y_rec, y_par) <= 1e-12
    errors = backward_rel_errors(lsa.backward, params, c_rec, c_par, rng.standard_normal(y_par.shape))
    assert max(errors.values()) <= 1e-12, errors


def test_lsa_step_by_step_equals_forward_and_state_is_sum_of_outer_products(rng):
    params = lsa.init(rng, 3)
    x = rng.standard_normal((2, 6, 3))
    W = np.zeros((2, 3, 3))
    ys = []
    for t in range(6):
        y_t, W = lsa.step_forward(params, W, x[:, t])
        ys.append(y_t)
    assert rel_error(np.stack(ys, axis=1), lsa.forward(params, x)[0]) <= 1e-12
    v, k = x @ params["W_V"].T, x @ params["W_K"].T
    assert rel_error(W, np.einsum("btv,btk->bvk", v, k)) <= 1e-12  # W_T = sum_t v_t k_t^T


def test_lsa_by_hand_with_identity_weights():
    # W_V = W_K = W_Q = I: y_t = sum_{s<=t} x_s (x_s . x_t).
    x = np.array([[[1.0, 0.0], [1.0, 2.0], [0.0, -1.0]]])
    params = {name: np.eye(2) for name in ("W_V", "W_K", "W_Q")}
    y, _ = lsa.forward(params, x)
    expected = np.array([[[1.0, 0.0],                         # x1 (x1.x1 = 1)
                          [1.0 + 5.0, 10.0],                  # x1 (x1.x2 = 1) + x2 (x2.x2 = 5)
                          [-2.0 + 0.0, -4.0 - 1.0]]])          # x1 (0) + x2 (-2) + x3 (1)
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-15)


def test_lsa_is_causal(rng):
    params = lsa.init(rng, 3)
    x = rng.standard_normal((1, 7, 3))
    x2 = x.copy()
    x2[:, 4:] += 1.0
    y, _ = lsa.forward(params, x)
    y2, _ = lsa.forward(params, x2)
    np.testing.assert_array_equal(y[:, :4], y2[:, :4])
    assert not np.allclose(y[:, 4:], y2[:, 4:])


# ---------------------------------------------------------------- softmax attention

@pytest.mark.parametrize("kw", [{}, {"D_k": 2, "D_v": 5, "D_out": 3, "output_projection": True}])
def test_softmax_transformer_mode_equals_rnn_mode(rng, kw):
    params = sa.init(rng, 4, **kw)
    x = rng.standard_normal((2, 9, 4))
    y_par, c_par = sa.forward(params, x)
    y_rnn, c_rnn = sa.forward(params, x, mode="sequential")
    assert rel_error(y_rnn, y_par) <= 1e-12
    assert rel_error(c_rnn.P, c_par.P) <= 1e-12


def test_softmax_rnn_mode_is_stable_where_exp_of_the_scores_overflows(rng):
    params = {k: 40.0 * w for k, w in sa.init(rng, 4).items()}
    x = 3.0 * rng.standard_normal((2, 7, 4))
    y_par, c = sa.forward(params, x)
    scores = c.q @ np.swapaxes(c.k, -1, -2) / np.sqrt(4)
    assert np.max(np.tril(scores)) > 800  # exp() of this overflows float64
    y_rnn, _ = sa.forward(params, x, mode="sequential")
    assert np.all(np.isfinite(y_par))
    assert rel_error(y_rnn, y_par) <= 1e-12


def test_softmax_step_by_step_state_is_the_growing_list_of_keys_and_values(rng):
    params = sa.init(rng, 3, output_projection=True)
    x = rng.standard_normal((2, 5, 3))
    state, ys = None, []
    for t in range(5):
        y_t, state = sa.step_forward(params, state, x[:, t])
        assert state.K.shape == (2, t + 1, 3) and state.V.shape == (2, t + 1, 3)
        ys.append(y_t)
    assert rel_error(np.stack(ys, axis=1), sa.forward(params, x)[0]) <= 1e-12
    np.testing.assert_array_equal(state.K, x @ params["W_K"].T)
    np.testing.assert_array_equal(state.V, x @ params["W_V"].T)


def test_softmax_weights_are_a_causal_distribution(rng):
    params = sa.init(rng, 3)
    _, c = sa.forward(params, rng.standard_normal((2, 6, 3)))
    np.testing.assert_allclose(c.P.sum(axis=2), 1.0, rtol=0, atol=1e-15)
    causal = np.tri(6, dtype=bool)
    assert np.all(c.P[:, ~causal] == 0) and np.all(c.P[:, causal] > 0)


@pytest.mark.parametrize("block", [1, 2, 3])
def test_causal_products_by_row_blocks_match_finite_differences_and_one_block(monkeypatch, block):
    """The examples' T (<= 5) fit in one block of ``_BLOCK`` queries: with blocks of 1-3 every product runs in
    several blocks (a ragged last one included), and the gradients still match finite differences."""
    base = [sa.forward(ex.params, ex.x, **ex.kwargs) for ex in sa.examples(np.random.default_rng(0))]
    monkeypatch.setattr(sa, "_BLOCK", block)
    for ex, (y1, c1) in zip(sa.examples(np.random.default_rng(0)), base):
        y, c = sa.forward(ex.params, ex.x, **ex.kwargs)
        assert rel_error(y, y1) <= 1e-13
        dy = np.random.default_rng(1).standard_normal(y.shape)
        (dx, g), (dx1, g1) = sa.backward(ex.params, c, dy), sa.backward(ex.params, c1, dy)
        assert rel_error(dx, dx1) <= 1e-13 and all(rel_error(g[k], g1[k]) <= 1e-13 for k in g)
        assert max(check_cell(sa, ex).values()) <= TOLERANCE


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.float32, 1e-6)])
@pytest.mark.parametrize("T", [1, 2, 7, 33, 128])
def test_fused_causal_softmax_and_its_backward_equal_the_numpy_formulas(rng, dtype, tol, T):
    from minimal.cells import _softmax_numba

    q, k = (3.0 * rng.standard_normal((5, T, 4)).astype(dtype) for _ in range(2))
    scale = 1.0 / np.sqrt(4.0)
    P = q @ k.transpose(0, 2, 1)
    _softmax_numba.causal_softmax_(P, scale)
    ref = sa.softmax_weights(q, k, scale)
    assert P.dtype == dtype and np.abs(P - ref).max() <= tol
    assert np.all(P[:, ~np.tri(T, dtype=bool)] == 0)
    G = rng.standard_normal((5, T, T)).astype(dtype)
    dA = scale * ref * (G - np.sum(ref * G, axis=2, keepdims=True))      # d/dA of softmax(scale A), masked
    _softmax_numba.causal_softmax_backward_(P, G, scale)
    assert np.abs(G - dA).max() <= tol * np.abs(dA).max()


@pytest.mark.parametrize("t,s", [(5, 2), (20, 3), (20, 17), (32, 32)])
@pytest.mark.parametrize("dtype,nan", [(np.float64, np.nan), (np.float32, np.nan), (np.float32, -np.nan)])
def test_a_nan_score_makes_its_row_of_the_fused_softmax_nan_and_no_other(rng, t, s, dtype, nan):
    """Whether the NaN sits in the row's whole vectors of eight or in its remainder, it is not skipped by the max
    (kept in eight lanes; float32: an integer max, where a NaN with its sign bit set, the x86 default NaN, sorts
    below -inf) without poisoning the row's sum: that row is NaN up to the diagonal, every other row as before."""
    from minimal.cells import _softmax_numba

    A = rng.standard_normal((2, 33, 33)).astype(dtype)
    ref = A.copy()
    _softmax_numba.causal_softmax_(ref, 0.5)
    A[1, t, s] = dtype(nan)
    assert np.signbit(A[1, t, s]) == np.signbit(nan)
    _softmax_numba.causal_softmax_(A, 0.5)
    assert np.isnan(A[1, t, :t + 1]).all() and np.all(A[1, t, t + 1:] == 0)
    others = np.ones(A.shape, bool)
    others[1, t] = False
    assert np.array_equal(A[others], ref[others])


@pytest.mark.parametrize("mode", sa.MODES)
def test_softmax_with_zero_queries_averages_the_values(rng, mode):
    # q = 0 makes every score 0: uniform attention, o_t = mean_{s<=t} v_s; at t = 1, o_1 = v_1.
    params = sa.init(rng, 3)
    params["W_Q"][:] = 0.0
    x = rng.standard_normal((2, 4, 3))
    y, _ = sa.forward(params, x, mode=mode)
    v = x @ params["W_V"].T
    expected = np.cumsum(v, axis=1) / np.arange(1, 5)[None, :, None]
    np.testing.assert_allclose(y, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(y[:, 0], v[:, 0], rtol=1e-15, atol=0)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("module", [lsa, sa], ids=["lsa", "softmax_attention"])
def test_bad_inputs_name_the_argument(rng, module):
    params = module.init(rng, 3)
    x = rng.standard_normal((2, 4, 3))
    with pytest.raises(ValueError, match=r"^x must have shape \(B, T, D=3\)"):
        module.forward(params, x[..., :2])
    with pytest.raises(ValueError, match=r"^x must have shape"):
        module.forward(params, x[0])
    with pytest.raises(ValueError, match=r"^x must have at least one time step"):
        module.forward(params, x[:, :0])
    with pytest.raises(ValueError, match=r"^x must have a floating dtype"):
        module.forward(params, x.astype(int))
    with pytest.raises(ValueError, match=r"^x contains NaN"):
        module.forward(params, np.where(x > 1, np.nan, x))
    with pytest.raises(ValueError, match=r"^mode must be one of"):
        module.forward(params, x, mode="chunked")
    with pytest.raises(ValueError, match=r"^W_K must have shape \(D_k(=3)?, D=3\)"):
        module.forward({**params, "W_K": params["W_K"][:, :2]}, x)
    with pytest.raises(ValueError, match=r"^W_[QK] must have shape \(D_k=[23], D=3\)"):  # whichever disagrees first
        module.forward({**params, "W_Q": params["W_Q"][:2]}, x)
    with pytest.raises(ValueError, match=r"^D must be an integer >= 1"):
        module.init(rng, 0)
    y, cache = module.forward(params, x)
    with pytest.raises(ValueError, match=r"^dy must have shape"):
        module.backward(params, cache, y[:, :-1])


@pytest.mark.parametrize("module", [lsa, sa], ids=["lsa", "softmax_attention"])
def test_one_dtype_throughout_nothing_is_promoted(rng, module):
    # like the gate-based cells: a float32 input to float64 params is refused, not silently run in float64
    params = module.init(rng, 3)
    x = rng.standard_normal((2, 4, 3))
    with pytest.raises(ValueError, match=r"^x must have the params' dtype float64, got float32"):
        module.forward(params, x.astype(np.float32))
    with pytest.raises(ValueError, match=r"^x must have the params' dtype float32, got float64"):
        module.forward({k: p.astype(np.float32) for k, p in params.items()}, x)
    with pytest.raises(ValueError, match=r"^W_K must have the dtype of W_\w \(float64\), got float32"):
        module.forward({**params, "W_K": params["W_K"].astype(np.float32)}, x)
    with pytest.raises(ValueError, match=r"^x_t must have the params' dtype float64, got float32"):
        state = np.zeros((2, 3, 3)) if module is lsa else None
        module.step_forward(params, state, x[:, 0].astype(np.float32))


def test_lsa_checks_its_params(rng):
    params = lsa.init(rng, 3)
    with pytest.raises(ValueError, match=r"^params must have keys W_V, W_K, W_Q"):
        lsa.forward({**params, "W_O": np.eye(3)}, rng.standard_normal((1, 2, 3)))


def test_lsa_step_forward_checks_its_state(rng):
    params = lsa.init(rng, 3, D_k=2)
    with pytest.raises(ValueError, match=r"^W_prev must have shape \(B=2, D_v=3, D_k=2\)"):
        lsa.step_forward(params, np.zeros((2, 3, 3)), rng.standard_normal((2, 3)))
    with pytest.raises(ValueError, match=r"^x_t must have shape \(B, D=3\)"):
        lsa.step_forward(params, np.zeros((2, 3, 2)), rng.standard_normal((2, 1, 3)))
    with pytest.raises(ValueError, match=r"^W_prev must have the params' dtype float64, got float32"):
        lsa.step_forward(params, np.zeros((2, 3, 2), np.float32), rng.standard_normal((2, 3)))


def test_softmax_attention_checks_params_and_state(rng):
    params = sa.init(rng, 3, output_projection=True)
    x = rng.standard_normal((1, 2, 3))
    with pytest.raises(ValueError, match=r"^params must have keys W_Q, W_K, W_V"):
        sa.forward({k: w for k, w in params.items() if k != "W_V"}, x)
    with pytest.raises(ValueError, match=r"^W_O must have shape \(D_out, D_v=3\)"):
        sa.forward({**params, "W_O": params["W_O"][:, :2]}, x)
    with pytest.raises(ValueError, match=r"^D_out must be None"):
        sa.init(rng, 3, D_out=2)
    _, state = sa.step_forward(params, None, x[:, 0])
    with pytest.raises(ValueError, match=r"^state.K must have shape"):
        sa.step_forward(params, sa.KVState(state.K[..., :2], state.V), x[:, 1])
    with pytest.raises(ValueError, match=r"^x_t must have shape"):
        sa.step_forward(params, state, x)
    with pytest.raises(ValueError, match=r"^state.K must have the params' dtype float64, got float32"):
        sa.step_forward(params, sa.KVState(state.K.astype(np.float32), state.V), x[:, 1])


# --- overflow (issue 12) ----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own overflow warnings come first
@pytest.mark.parametrize("module,mode", [(lsa, "parallel"), (lsa, "sequential"), (sa, "parallel"), (sa, "sequential")])
def test_finite_inputs_that_overflow_name_what_the_caller_gave(rng, module, mode):
    """float32 x of 1e20 makes the scores q . k ~ 1e40: NaN or inf came back without a word."""
    p32 = {k: v.astype(np.float32) for k, v in module.init(rng, 3).items()}
    x = (1e20 * rng.standard_normal((2, 4, 3))).astype(np.float32)
    with pytest.raises(ValueError, match=r"^x has float32 values up to [0-9.]+e\+20, W_\w has float32 values up to "
                                         r".*: the scores .* overflowed to inf or NaN \(float32 holds at most "
                                         r"3.4e\+38\); scale them down, or use float64"):
        module.forward(p32, x, mode=mode)
    y, cache = module.forward(p32, (1e3 * rng.standard_normal((2, 4, 3))).astype(np.float32), mode=mode)
    with pytest.raises(ValueError, match=r"^dy has float32 values up to 1e\+37, x has .*the gradients overflowed"):
        module.backward(p32, cache, np.full_like(y, 1e37))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_step_forward_overflow_names_its_inputs(rng):
    p32 = {k: v.astype(np.float32) for k, v in lsa.init(rng, 3).items()}
    x_t = np.full((1, 3), 1e20, np.float32)
    with pytest.raises(ValueError, match=r"^x_t has float32 values up to 1e\+20, W_prev .*overflowed"):
        lsa.step_forward(p32, np.zeros((1, 3, 3), np.float32), x_t)
    p32 = {k: v.astype(np.float32) for k, v in sa.init(rng, 3).items()}
    with pytest.raises(ValueError, match=r"^x_t has float32 values up to 1e\+20, W_Q .*overflowed"):
        sa.step_forward(p32, None, x_t)
