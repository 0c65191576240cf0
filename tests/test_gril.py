"""The GRIL block (Tian et al., Def. 4.2): gradients, the two modes, the windows, and the paper's claims."""
import numpy as np
import pytest

from minimal.cells import gril
from minimal.gradcheck import TOLERANCE, backward_rel_errors, check_cell, check_function, rel_error

EXAMPLES = gril.examples(np.random.default_rng(0))
REF = {"method": "sequential", "backend": "numpy"}  # the plain scan loop


def _case(rng, B=2, T=9, f=3, w=3, s=2, per_feature=True):
    params = gril.init(rng, f, w, per_feature)
    params["beta"] = rng.standard_normal(params["beta"].shape)  # ones would hide a missing β in a gradient
    return params, rng.standard_normal((B, T, f))


# ------------------------------------------------------------------------------------ gradients
@pytest.mark.parametrize("ex", EXAMPLES, ids=[ex.name for ex in EXAMPLES])
def test_backward_matches_finite_differences_for_every_param_and_the_input(ex):
    errors = check_cell(gril, ex)
    assert set(errors) == {"x", "Q", "beta", "A", "u" if ex.kwargs.get("readout") == "state" else "q"}
    assert max(errors.values()) <= TOLERANCE, errors


def test_examples_cover_T1_odd_T_overlap_and_stride():
    shapes = [(ex.x.shape[1], ex.params["Q"].shape[0], ex.kwargs["s"]) for ex in EXAMPLES]
    assert (1, 1, 1) in shapes
    assert any(T % 2 == 1 and T > 1 for T, _, _ in shapes)
    assert any(s < w for _, w, s in shapes) and any(s == w > 1 for _, w, s in shapes)
    assert any(s > w for _, w, s in shapes)
    assert {ex.params["beta"].shape == (1,) for ex in EXAMPLES} == {True, False}  # scalar and per-feature β
    assert all(ex.n_params() + ex.x.size <= 400 for ex in EXAMPLES)


# ------------------------------------------------------------------------------------ two modes
def test_sequential_mode_equals_parallel_mode_forward_and_backward(rng):
    params, x = _case(rng)
    o_par, cache_par = gril.forward(params, x, s=2, mode="parallel", **REF)
    o_seq, cache_seq = gril.forward(params, x, s=2, mode="sequential")
    assert o_par.shape == (2, 4, 3)
    assert rel_error(o_seq, o_par) <= 1e-12
    errors = backward_rel_errors(gril.backward, params, cache_seq, cache_par, rng.standard_normal(o_par.shape))
    assert max(errors.values()) <= 1e-12, errors


def test_step_forward_is_one_window_of_the_sequential_mode(rng):
    params, x = _case(rng, T=5, w=3, s=1)
    o, cache = gril.forward(params, x, s=1, mode="sequential")
    o_1, Z_1 = gril.step_forward(params, cache.Z[:, 0], cache.C[:, 1])
    assert rel_error(o_1, o[:, 1]) <= 1e-14
    assert rel_error(Z_1, cache.Z[:, 1]) <= 1e-14


SCANS = [("blelloch", "numpy", None), ("sequential", "numba", "unfused"), ("blelloch", "numba", "unfused"),
         (None, "numba", "fused"), (None, None, None), (None, "cuda", "unfused"), (None, "cuda", None)]


@pytest.mark.parametrize("method,backend,kernel", SCANS, ids=[f"{b}-{k}-{m}" for m, b, k in SCANS])
def test_every_scan_gives_the_reference_output_and_gradients(method, backend, kernel, rng):
    """(None, None, None) is the default: the fused Numba kernel. backend="cuda" is the whole block in
    cuda_kernels.window: fused forward (None: the default for f <= 32) or unfused with its Blelloch scan."""
    if backend in ("numba", None):
        pytest.importorskip("minimal.scan.numba_linear")
    if backend == "cuda":
        pytest.importorskip("cuda_kernels.scan")  # the CUDA simulator on CPU machines (tests/conftest.py)
    params, x = _case(rng, T=8, w=2, s=3)  # T' = 3
    o_ref, cache_ref = gril.forward(params, x, s=3, **REF)
    o, cache = gril.forward(params, x, s=3, method=method, backend=backend, kernel=kernel)
    assert rel_error(o, o_ref) <= 1e-12
    errors = backward_rel_errors(gril.backward, params, cache, cache_ref, rng.standard_normal(o.shape))
    assert max(errors.values()) <= 1e-12, errors


def test_cuda_backend_runs_the_window_kernels_and_keeps_x_and_Z_on_the_device(rng):
    cuda = pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda_kernels.window")
    params, x = _case(rng, B=1, T=5, f=2, w=3, s=1)
    o, cache = gril.forward(params, x, s=1, backend="cuda")
    assert cuda.devicearray.is_cuda_ndarray(cache.Z) and cuda.devicearray.is_cuda_ndarray(cache.x_device)
    assert isinstance(o, np.ndarray)
    dx, grads = gril.backward(params, cache, np.ones_like(o))
    assert isinstance(dx, np.ndarray) and set(grads) == set(params)
    with pytest.raises(ValueError, match="method must be one of"):
        gril.forward(params, x, s=1, method="tree", backend="cuda")


def test_reference_function_equals_the_cell(rng):
    params, x = _case(rng, T=7, w=3, s=2)
    o, _ = gril.forward(params, x, s=2, **REF)
    o_ref = gril.gril_forward_reference(x, params["Q"], params["q"], params["beta"], params["A"], 3, 2)
    assert rel_error(o_ref, o) <= 1e-14


# ------------------------------------------------------------------------------------ states and the state readout
STATE_CASES = [(2, 1, 2, 1, 1), (2, 5, 3, 2, 1), (1, 7, 3, 3, 2), (2, 8, 2, 2, 3)]   # B, T, f, w, s: T = 1, odd T


def _states_case(rng, B, T, f, w, s):
    C = gril.window(rng.standard_normal((B, T, f)), w, s)
    return {"Q": rng.standard_normal((w, w)), "A": rng.uniform(0.5, 1.0, (f, f))}, C


@pytest.mark.parametrize("method,backend", [("sequential", "numpy"), ("blelloch", "numpy"), (None, None)])
def test_states_are_the_states_of_the_step_loop(method, backend, rng):
    params, x = _case(rng, T=9, w=3, s=2)
    _, cache = gril.forward(params, x, s=2, mode="sequential")
    Z = gril.states(params["Q"], params["A"], cache.C, method=method, backend=backend)
    assert rel_error(Z, cache.Z) <= 1e-13


@pytest.mark.parametrize("only_last", [False, True], ids=["every-state", "last-state"])
@pytest.mark.parametrize("case", STATE_CASES, ids=[f"T{c[1]}-w{c[3]}-s{c[4]}" for c in STATE_CASES])
def test_states_backward_matches_finite_differences(case, only_last, rng):
    """Central differences in float64 for Q, A and the windows C, with dL/dZ at every state or (the GD stack's
    case) at the last one only."""
    params, C = _states_case(rng, *case)

    def forward(p, C):
        Z = gril.states(p["Q"], p["A"], C, **REF)
        return (Z[:, -1] if only_last else Z), Z

    def backward(p, Z, dZ):
        if only_last:
            dZ = np.concatenate([np.zeros_like(Z[:, :-1]), dZ[:, None]], axis=1)
        dQ, dA, dC = gril.states_backward(p["Q"], p["A"], C, Z, dZ, **REF)
        return dC, {"Q": dQ, "A": dA}

    errors = check_function(forward, backward, params, C)
    assert max(errors.values()) <= TOLERANCE, errors


def test_states_backward_of_the_last_state_is_the_reverse_loop(rng):
    """Only Z_{T'-1} in the loss: G_k = A^{T'-1-k} ⊙ G, dA = Σ_{k>=1} G_k ⊙ Z_{k-1}, dU_k = G_k, written as the
    plain loop over windows backwards (the loop the GD stack used to carry), against the scan's adjoint."""
    params, C = _states_case(rng, 3, 9, 3, 3, 2)
    Q, A = params["Q"], params["A"]
    Z = gril.states(Q, A, C, **REF)
    G = rng.standard_normal(Z[:, -1].shape)
    dU, dA_loop = np.empty_like(Z), np.zeros_like(A)
    for k in reversed(range(Z.shape[1])):
        dU[:, k] = G
        if k > 0:
            dA_loop += (G * Z[:, k - 1]).sum(axis=0)
            G = A * G
    dZ = np.zeros_like(Z)
    dZ[:, -1] = dU[:, -1]
    for backend in ("numpy", "numba"):
        dQ, dA, dC = gril.states_backward(Q, A, C, Z, dZ, backend=backend)
        assert rel_error(dA, dA_loop) <= 1e-13
        assert rel_error(dQ, (C.transpose(0, 1, 3, 2) @ dU @ C).sum(axis=(0, 1))) <= 1e-13
        assert rel_error(dC, dU @ C @ Q.T + dU.transpose(0, 1, 3, 2) @ C @ Q) <= 1e-13


def test_state_readout_is_beta_times_the_state_times_u(rng):
    """readout="state": o_k = β ⊙ (Z_k u) at every window (the ablation of Tables 5-6), in both modes."""
    params = gril.init(rng, 3, 3, per_feature_beta=True, readout="state")
    assert set(params) == {"Q", "u", "beta", "A"}
    x = rng.standard_normal((2, 9, 3))
    for mode, kw in (("parallel", REF), ("parallel", {"backend": "numba"}), ("sequential", {})):
        o, cache = gril.forward(params, x, s=2, mode=mode, readout="state", **kw)
        assert rel_error(o, params["beta"] * (cache.Z @ params["u"])) <= 1e-14
        assert rel_error(cache.Z, gril.states(params["Q"], params["A"], gril.window(x, 3, 2))) <= 1e-13


def test_state_readout_is_refused_where_it_cannot_run_and_checked_against_the_params(rng):
    params = gril.init(rng, 3, 3, readout="state")
    x = rng.standard_normal((1, 7, 3))
    with pytest.raises(ValueError, match=r"^readout='state' runs in sequential mode or on the unfused kernel"):
        gril.forward(params, x, s=2, kernel="fused", readout="state")
    with pytest.raises(ValueError, match=r"^readout must be one of \['window', 'state'\], got 'last'"):
        gril.forward(params, x, s=2, readout="last")
    with pytest.raises(ValueError, match=r"params must be a dict with exactly the keys \['A', 'Q', 'beta', 'u'\] "
                                         r"\(readout='state'\), got \['A', 'Q', 'beta', 'q'\]"):
        gril.forward(gril.init(rng, 3, 3), x, s=2, readout="state")
    with pytest.raises(ValueError, match=r"params must be a dict with exactly the keys \['A', 'Q', 'beta', 'q'\]"):
        gril.forward(params, x, s=2)                     # readout "window" (the default) reads with q
    with pytest.raises(ValueError, match=r"^dZ must have shape"):
        gril.states_backward(params["Q"], params["A"], gril.window(x, 3, 2), np.zeros((1, 3, 3, 3)),
                             np.zeros((1, 2, 3, 3)))


# ------------------------------------------------------------------------------------ windows
@pytest.mark.parametrize("T,w,s", [(1, 1, 1), (6, 3, 1), (7, 3, 2), (8, 2, 3), (4, 4, 5)])
def test_window_k_holds_tokens_ks_to_ks_plus_w_minus_1(T, w, s, rng):
    x = rng.standard_normal((2, T, 3))
    C = gril.window(x, w, s)
    T_out = (T - w) // s + 1
    assert C.shape == (2, T_out, 3, w) == (2, gril.n_windows(T, w, s), 3, w)
    for k in range(T_out):
        for j in range(w):
            np.testing.assert_array_equal(C[:, k, :, j], x[:, k * s + j, :])


@pytest.mark.parametrize("T,w,s", [(1, 1, 1), (6, 3, 1), (7, 3, 2), (8, 2, 3)])
def test_window_backward_is_the_adjoint_of_window(T, w, s, rng):
    x = rng.standard_normal((2, T, 3))
    dC = rng.standard_normal((2, (T - w) // s + 1, 3, w))
    lhs = np.sum(gril.window(x, w, s) * dC)
    rhs = np.sum(x * gril.window_backward(dC, T, w, s))
    assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


def test_window_backward_sums_over_overlapping_windows():
    dx = gril.window_backward(np.ones((1, 4, 1, 3)), T=6, w=3, s=1)
    np.testing.assert_array_equal(dx[0, :, 0], [1, 2, 3, 3, 2, 1])
    dx = gril.window_backward(np.ones((1, 3, 1, 1)), T=7, w=1, s=3)  # s > w: skipped steps get nothing
    np.testing.assert_array_equal(dx[0, :, 0], [1, 0, 0, 1, 0, 0, 1])


# ------------------------------------------------------------------------------------ the paper
def test_with_A_one_the_state_is_the_running_sum_of_window_cross_products(rng):
    params, x = _case(rng, T=7, w=3, s=2)
    params["A"] = np.ones_like(params["A"])
    _, cache = gril.forward(params, x, s=2, **REF)
    U = np.stack([C_k @ params["Q"] @ C_k.T for C_k in cache.C[0]])  # batch 0, (T', f, f)
    np.testing.assert_allclose(cache.Z[0], np.cumsum(U, axis=0), rtol=1e-13, atol=1e-13)


def test_with_w1_A1_Q1_q1_the_block_is_causal_linear_attention_on_x(rng):
    """o_t = β (Σ_{s<=t} x_s x_s^T) x_t: keys, values and queries all x."""
    x = rng.standard_normal((2, 5, 3))
    params = {"Q": np.ones((1, 1)), "q": np.ones(1), "beta": np.array([0.7]), "A": np.ones((3, 3))}
    o, _ = gril.forward(params, x, s=1, **REF)
    for t in range(5):
        S = np.einsum("bsi,bsj->bij", x[:, :t + 1], x[:, :t + 1])
        np.testing.assert_allclose(o[:, t], 0.7 * np.einsum("bij,bj->bi", S, x[:, t]), rtol=1e-13, atol=1e-13)


def test_construction_reproduces_one_step_of_gradient_descent_on_least_squares(rng):
    """Tokens x_1, y_1, ..., x_N, y_N, x_q, 0 in a shared f = d_x + d_y space, w = s = 2: window i is
    (x_i, y_i). Q = [[0, 0], [1, 0]] writes y_i x_i^T into the state, A = 1 keeps the sum, q = (1, 0) reads
    the state with the query and β = η / N is the step size, so the last output's y part is W_1 x_q with
    W_1 = W_0 − η ∇L(W_0), L(W) = 1/(2N) Σ ||W x_i − y_i||², W_0 = 0. This width-2 layout (query in a window
    of its own, x and y in separate slots) is a variant of ours; the paper's own layout (Prop. 4.1: w = 3,
    s = 2, windows [x_j, y_j, x_{j+1}]) is tested in tests/test_gril_constructions.py."""
    N, d_x, d_y, eta = 6, 3, 2, 0.3
    X, Y, x_q = rng.standard_normal((N, d_x)), rng.standard_normal((N, d_y)), rng.standard_normal(d_x)
    f = d_x + d_y
    tokens = np.zeros((1, 2 * N + 2, f))
    tokens[0, 0:2 * N:2, :d_x] = X
    tokens[0, 1:2 * N:2, d_x:] = Y
    tokens[0, 2 * N, :d_x] = x_q  # the last token is the empty label
    params = {"Q": np.array([[0.0, 0.0], [1.0, 0.0]]), "q": np.array([1.0, 0.0]),
              "beta": np.array([eta / N]), "A": np.ones((f, f))}
    for mode in gril.MODES:
        o, _ = gril.forward(params, tokens, s=2, mode=mode, **(REF if mode == "parallel" else {}))
        W_0 = np.zeros((d_y, d_x))
        grad_L = (X @ W_0.T - Y).T @ X / N
        W_1 = W_0 - eta * grad_L
        np.testing.assert_allclose(o[0, -1, d_x:], W_1 @ x_q, rtol=1e-13, atol=1e-14)
        np.testing.assert_array_equal(o[0, -1, :d_x], 0.0)  # nothing is written into the x rows


# ------------------------------------------------------------------------------------ bad input
def _good(rng):
    return _case(rng, B=1, T=5, f=2, w=3, s=1)


def test_window_wider_than_the_sequence_names_w_and_T(rng):
    params, x = _good(rng)
    with pytest.raises(ValueError, match=r"w must be <= T .*w=3, T=2"):
        gril.forward(params, x[:, :2], **REF)
    with pytest.raises(ValueError, match=r"w must be <= T"):
        gril.window(x, 6, 1)


@pytest.mark.parametrize("s", [0, -1, 1.5, True])
def test_stride_must_be_a_positive_integer(s, rng):
    params, x = _good(rng)
    with pytest.raises(ValueError, match="s must be an integer >= 1"):
        gril.forward(params, x, s=s, **REF)


def test_windows_must_reach_the_last_token(rng):
    params, x = _good(rng)  # w = 3; with s = 2, T = 6 would leave the last token in no window
    with pytest.raises(ValueError, match=r"T must satisfy \(T - w\) % s == 0.*T=6, w=3, s=2"):
        gril.forward(params, np.concatenate([x, x[:, :1]], axis=1), s=2, **REF)


def test_bad_shapes_name_the_argument(rng):
    params, x = _good(rng)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, f=2\)"):
        gril.forward(params, x[..., :1], **REF)
    with pytest.raises(ValueError, match="x must have shape"):
        gril.forward(params, x[0], **REF)
    with pytest.raises(ValueError, match="x must have a floating dtype"):
        gril.forward(params, x.astype(int), **REF)
    with pytest.raises(ValueError, match="x contains NaN"):
        gril.forward(params, np.full_like(x, np.nan), **REF)
    for name, bad in [("Q", np.ones((3, 2))), ("q", np.ones(2)), ("beta", np.ones(3)), ("beta", np.ones((1, 1))),
                      ("A", np.ones((2, 3)))]:
        with pytest.raises(ValueError, match=f"^{name} must have"):
            gril.forward({**params, name: bad}, x, **REF)
    with pytest.raises(ValueError, match="mode must be one of"):
        gril.forward(params, x, mode="recurrent", **REF)
    o, cache = gril.forward(params, x, **REF)
    with pytest.raises(ValueError, match="do must have shape"):
        gril.backward(params, cache, o[:, 1:])
    with pytest.raises(ValueError, match="dC must have shape"):
        gril.window_backward(np.ones((1, 2, 2, 3)), T=5, w=3, s=1)
    with pytest.raises(ValueError, match="Z_prev must have shape"):
        gril.step_forward(params, np.zeros((1, 2, 3)), cache.C[:, 0])
    with pytest.raises(ValueError, match="C_t must have shape"):
        gril.step_forward(params, np.zeros((1, 2, 2)), cache.C[:, 0, :, :2])
    with pytest.raises(ValueError, match="dZ_t must have shape"):
        gril.step_backward(params, np.zeros((1, 2, 2)), cache.C[:, 0], o[:, 0], np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="w must equal the size of Q"):
        gril.gril_forward_reference(x, params["Q"], params["q"], params["beta"], params["A"], 2, 1)


def test_params_must_have_exactly_the_four_names(rng):
    params, x = _good(rng)
    o, cache = gril.forward(params, x, **REF)
    missing = {k: v for k, v in params.items() if k != "beta"}
    extra = {**params, "bias": np.zeros(2)}
    for bad in (missing, extra):
        with pytest.raises(ValueError, match=r"params must be a dict with exactly the keys \['A', 'Q', 'beta', 'q'\]"):
            gril.forward(bad, x, **REF)
        with pytest.raises(ValueError, match="params must"):
            gril.backward(bad, cache, o)
        with pytest.raises(ValueError, match="params must"):
            gril.step_forward(bad, np.zeros((1, 2, 2)), cache.C[:, 0])


def test_init_shapes(rng):
    p = gril.init(rng, 4, 3)
    assert {k: v.shape for k, v in p.items()} == {"Q": (3, 3), "q": (3,), "beta": (1,), "A": (4, 4)}
    assert gril.init(rng, 4, 3, per_feature_beta=True)["beta"].shape == (4,)
    with pytest.raises(ValueError, match="w must be an integer >= 1"):
        gril.init(rng, 4, 0)


# --- reliability (issue 12) ------------------------------------------------------------------------------

PATHS = [("parallel", {"method": "sequential", "backend": "numpy"}), ("parallel", {"backend": "numba"}),
         ("parallel", {"method": "blelloch", "backend": "numba", "kernel": "unfused"}), ("sequential", {})]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode,kw", PATHS, ids=[f"{m}-{kw.get('backend', '')}-{kw.get('method', '')}" for m, kw in PATHS])
def test_an_input_of_another_dtype_than_the_params_is_refused_not_promoted(rng, dtype, mode, kw):
    """One rule for every cell: x must have the params' dtype (float32 x on float64 params returned float64)."""
    params, x = _good(rng)
    want = ("x must be float32 or float64" if dtype == np.float16 else   # float16 is refused for itself (issue 32)
            f"x must have the params' dtype float64, got {np.dtype(dtype)}")
    with pytest.raises(ValueError, match=want):
        gril.forward(params, x.astype(dtype), mode=mode, **kw)


def test_params_and_step_inputs_share_one_dtype(rng):
    params, x = _good(rng)
    o, cache = gril.forward(params, x, **REF)
    with pytest.raises(ValueError, match="Q must have the dtype of A"):
        gril.forward({**params, "Q": params["Q"].astype(np.float32)}, x, **REF)
    with pytest.raises(ValueError, match="C_t must have the params' dtype float64"):
        gril.step_forward(params, np.zeros((1, 2, 2)), cache.C[:, 0].astype(np.float32))
    with pytest.raises(ValueError, match="Z_prev must have the params' dtype float64"):
        gril.step_forward(params, np.zeros((1, 2, 2), np.float32), cache.C[:, 0])
    with pytest.raises(ValueError, match="do_t must have the params' dtype float64"):
        gril.step_backward(params, np.zeros((1, 2, 2)), cache.C[:, 0], o[:, 0].astype(np.float32),
                           np.zeros((1, 2, 2)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own overflow warnings come first
@pytest.mark.parametrize("mode,kw", PATHS, ids=[f"{m}-{kw.get('backend', '')}-{kw.get('method', '')}" for m, kw in PATHS])
def test_overflow_names_what_the_caller_gave_not_internal_arrays(rng, mode, kw):
    """float32 x of 1e15: U ~ 1e30 fits, o = β Z C q ~ 1e45 does not (o was returned as inf, or the scan
    complained about its own b); a huge do overflowed inside the backward, which named dC."""
    params, x = _good(rng)
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    with pytest.raises(ValueError, match=r"^x has float32 values up to [0-9.]+e\+1[56], Q has float32 .*: the "
                                         r"output o overflowed to inf or NaN \(float32 holds at most 3.4e\+38\)"):
        gril.forward(p32, (x * 1e15).astype(np.float32), mode=mode, **kw)
    with pytest.raises(ValueError, match=r"^x has float32 values up to [0-9.]+e\+2[01], .*: the window updates "
                                         r"U = C Q C\^T overflowed"):
        gril.forward(p32, (x * 1e20).astype(np.float32), **REF)
    o, cache = gril.forward(p32, (x * 1e3).astype(np.float32), mode=mode, **kw)
    with pytest.raises(ValueError, match=r"^do has float32 values up to 1e\+35, .*overflowed to inf or NaN"):
        gril.backward(p32, cache, np.full_like(o, 1e35))
