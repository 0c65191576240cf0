"""Building blocks: Linear, GLU, MLP, LayerNorm, Embedding, positional embedding, residual wrapper, cross-entropy and MSE losses."""
import math

import numpy as np
import pytest

from minimal.cells import REGISTRY
from minimal.gradcheck import rel_error
from minimal.layers import causal_conv, cross_entropy, embedding, glu, layernorm, linear, mlp, mse, positional
from minimal.cells import residual

LAYERS = ("linear", "glu", "mlp", "layernorm", "embedding", "positional", "residual", "cross_entropy", "mse")
# The float64 gradient check of every layer's examples: tests/test_registry.py.


def test_every_layer_is_registered():
    assert set(LAYERS) <= set(REGISTRY)


# ---------------------------------------------------------------- values

def test_positional_embedding_adds_row_t_of_p_and_refuses_too_long_a_sequence(rng):
    p = positional.init(rng, 4, 2)
    x = rng.standard_normal((3, 3, 2))
    y, _ = positional.forward(p, x)
    assert np.array_equal(y, x + p["P"][None, :3])
    with pytest.raises(ValueError, match="at most T_max = 4"):
        positional.forward(p, rng.standard_normal((1, 5, 2)))


def test_linear_by_hand():
    params = {"W": np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]]), "b": np.array([0.5, 0.0, -1.0])}
    y, _ = linear.forward(params, np.array([[[2.0, 1.0]]]))
    np.testing.assert_array_equal(y, [[[2.5, 3.0, 2.0]]])


def test_linear_acts_on_the_last_axis_only(rng):
    params = linear.init(rng, 3, 2)
    x = rng.standard_normal((2, 5, 3))
    y, _ = linear.forward(params, x)
    np.testing.assert_allclose(y.reshape(10, 2), linear.forward(params, x.reshape(10, 3))[0], rtol=1e-15)


def test_glu_with_a_zero_gate_halves_the_linear_path(rng):
    params = glu.init(rng, 3, 2)
    params["b_1"] = rng.standard_normal(2)
    params["W_2"][:] = 0.0  # σ(0) = 1/2
    x = rng.standard_normal((2, 4, 3))
    y, _ = glu.forward(params, x)
    np.testing.assert_allclose(y, 0.5 * (x @ params["W_1"] + params["b_1"]), rtol=1e-15)


def test_glu_gate_saturates_without_overflow(rng):
    params = glu.init(rng, 1, 1)
    params["W_1"][:] = 1.0
    params["W_2"][:] = 1e4
    with np.errstate(over="raise", invalid="raise"):  # exp(-1e4) underflowing to 0 is fine
        y, _ = glu.forward(params, np.array([[-1.0], [1.0]]))
    np.testing.assert_array_equal(y, [[0.0], [1.0]])  # gate closed, gate open


def test_gelu_values():
    # GELU(0) = 0, GELU(u) -> u for large u and -> 0 for very negative u; GELU(1) of the tanh form.
    u = np.array([0.0, 1.0, 10.0, -10.0])
    np.testing.assert_allclose(mlp.gelu(u), [0.0, 0.8411919906082768, 10.0, 0.0], rtol=1e-14, atol=1e-15)


def test_mlp_is_linear_gelu_linear(rng):
    params = mlp.init(rng, 3, 5, 2)
    x = rng.standard_normal((2, 3, 3))
    h = mlp.gelu(x @ params["W_1"] + params["b_1"])
    np.testing.assert_allclose(mlp.forward(params, x)[0], h @ params["W_2"] + params["b_2"], rtol=1e-14)


def test_layernorm_output_has_zero_mean_and_unit_variance(rng):
    x = 3.0 + 2.0 * rng.standard_normal((2, 5, 8))
    y, _ = layernorm.forward(layernorm.init(rng, 8), x, eps=1e-5)
    var = x.var(axis=-1, keepdims=True)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-15)
    # variance 1 up to the eps that is added to sigma^2
    np.testing.assert_allclose(y.var(axis=-1, keepdims=True), var / (var + 1e-5), rtol=1e-13)


def test_layernorm_is_invariant_to_shift_and_scale_of_its_input(rng):
    params = {"gamma": rng.standard_normal(4), "beta": rng.standard_normal(4)}
    x = rng.standard_normal((3, 4))
    y, _ = layernorm.forward(params, x, eps=1e-12)
    y2, _ = layernorm.forward(params, 7.0 * x - 2.0, eps=1e-12 * 49.0)
    assert rel_error(y2, y) <= 1e-12


def test_embedding_is_a_one_hot_matrix_product(rng):
    params = embedding.init(rng, 5, 3)
    x = np.array([[0, 4, 4], [2, 1, 0]])
    y, cache = embedding.forward(params, x)
    np.testing.assert_array_equal(y, np.eye(5)[x] @ params["E"])
    # Backward: row v of dE is the sum of dy over the positions holding id v.
    dy = rng.standard_normal(y.shape)
    dx, grads = embedding.backward(params, cache, dy)
    assert dx is None
    np.testing.assert_allclose(grads["E"][4], dy[0, 1] + dy[0, 2], rtol=1e-15)
    np.testing.assert_array_equal(grads["E"][3], 0.0)


def test_residual_adds_the_inner_output_and_passes_its_gradients(rng):
    params = mlp.init(rng, 3, 4)
    x = rng.standard_normal((2, 3, 3))
    y, cache = residual.forward(params, x, inner="mlp")
    fx, fcache = mlp.forward(params, x)
    np.testing.assert_array_equal(y, x + fx)
    dy = rng.standard_normal(y.shape)
    dx, grads = residual.backward(params, cache, dy)
    dfx, fgrads = mlp.backward(params, fcache, dy)
    np.testing.assert_array_equal(dx, dy + dfx)
    assert set(grads) == set(params)
    for key in params:
        np.testing.assert_array_equal(grads[key], fgrads[key])


def test_residual_init_and_forward_kwargs_go_to_the_inner_module(rng):
    params = residual.init(rng, inner="lsa", D=3)
    assert set(params) == {"W_V", "W_K", "W_Q"}
    x = rng.standard_normal((1, 4, 3))
    y_rec, _ = residual.forward(params, x, inner="lsa", mode="sequential")
    y_par, _ = residual.forward(params, x, inner="lsa")
    assert rel_error(y_rec, y_par) <= 1e-12


def test_cross_entropy_of_uniform_logits_is_log_V(rng):
    for V in (2, 7):
        loss, _ = cross_entropy.forward({}, np.full((2, 3, V), 0.3), targets=rng.integers(0, V, (2, 3)))
        assert loss.shape == ()
        assert abs(float(loss) - math.log(V)) <= 1e-15


def test_cross_entropy_by_hand_and_stable_for_huge_logits():
    logits = np.array([[0.0, math.log(3.0)], [2.0, 2.0]])  # softmax rows: (1/4, 3/4), (1/2, 1/2)
    loss, _ = cross_entropy.forward({}, logits, targets=np.array([1, 0]))
    assert abs(float(loss) - 0.5 * (math.log(4 / 3) + math.log(2.0))) <= 1e-15
    # log-softmax is shift-invariant; exp(1e4) would overflow without the max subtraction.
    shifted, _ = cross_entropy.forward({}, logits + 1e4, targets=np.array([1, 0]))
    assert abs(float(shifted) - float(loss)) <= 1e-12


def test_cross_entropy_gradient_rows_sum_to_zero(rng):
    logits = rng.standard_normal((3, 4, 5))
    _, cache = cross_entropy.forward({}, logits, targets=rng.integers(0, 5, (3, 4)))
    dlogits, grads = cross_entropy.backward({}, cache, np.array(1.0))
    assert grads == {}
    np.testing.assert_allclose(dlogits.sum(axis=-1), 0.0, atol=1e-16)


def test_mse_by_hand():
    loss, cache = mse.forward({}, np.array([[1.0, 2.0]]), target=np.array([[0.0, 0.0]]))
    assert loss.shape == () and float(loss) == 2.5  # (1 + 4) / 2
    dy_pred, grads = mse.backward({}, cache, np.array(1.0))
    np.testing.assert_array_equal(dy_pred, [[1.0, 2.0]])  # 2 (y_pred - target) / N
    assert grads == {}


# ---------------------------------------------------------------- bad input

def test_dense_layers_name_bad_arguments(rng):
    x = rng.standard_normal((2, 3, 3))
    for module, params in [(linear, linear.init(rng, 3, 2)), (glu, glu.init(rng, 3, 2)), (mlp, mlp.init(rng, 3, 4))]:
        with pytest.raises(ValueError, match=r"^x must have shape \(\.\.\., D_in=3\)"):
            module.forward(params, x[..., :2])
        with pytest.raises(ValueError, match=r"^x must have a floating dtype"):
            module.forward(params, x.astype(int))
        y, cache = module.forward(params, x)
        with pytest.raises(ValueError, match=r"^dy must have shape"):
            module.backward(params, cache, y[:, :1])
    with pytest.raises(ValueError, match=r"^b must have shape \(D_out=2\)"):
        linear.forward({"W": np.ones((3, 2)), "b": np.ones(3)}, x)
    with pytest.raises(ValueError, match=r"^W_2 must have shape \(D_in=3, D_out=2\)"):
        glu.forward({**glu.init(rng, 3, 2), "W_2": np.ones((3, 3))}, x)
    with pytest.raises(ValueError, match=r"^W_2 must have shape \(H=4, D_out\)"):
        mlp.forward({**mlp.init(rng, 3, 4), "W_2": np.ones((3, 3))}, x)
    with pytest.raises(ValueError, match=r"^b_2 must have shape \(D_out=3\)"):
        mlp.forward({**mlp.init(rng, 3, 4), "b_2": np.ones(4)}, x)
    with pytest.raises(ValueError, match=r"^D_out must be an integer >= 1"):
        linear.init(rng, 3, 0)
    with pytest.raises(ValueError, match=r"^H must be an integer >= 1"):
        mlp.init(rng, 3, 0)


def test_layernorm_names_bad_arguments(rng):
    params = layernorm.init(rng, 4)
    x = rng.standard_normal((2, 4))
    with pytest.raises(ValueError, match=r"^x must have shape \(\.\.\., D=4\)"):
        layernorm.forward(params, x[:, :3])
    with pytest.raises(ValueError, match=r"^beta must have shape \(D=4\)"):
        layernorm.forward({**params, "beta": np.zeros(3)}, x)
    for eps in (0.0, -1e-5, None):
        with pytest.raises(ValueError, match=r"^eps must be a positive number"):
            layernorm.forward(params, x, eps=eps)


def test_embedding_names_bad_ids(rng):
    params = embedding.init(rng, 5, 2)
    with pytest.raises(ValueError, match=r"^x must hold token ids in \[0, V=5\)"):
        embedding.forward(params, np.array([[0, 5]]))
    with pytest.raises(ValueError, match=r"^x must hold token ids in \[0, V=5\)"):
        embedding.forward(params, np.array([[-1, 2]]))
    with pytest.raises(ValueError, match=r"^x must have an integer dtype"):
        embedding.forward(params, np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"^x must have shape \(B, T\)"):
        embedding.forward(params, np.array([0, 1]))
    _, cache = embedding.forward(params, np.array([[0, 1]]))
    with pytest.raises(ValueError, match=r"^dy must have shape \(B=1, T=2, D=2\)"):
        embedding.backward(params, cache, np.zeros((1, 2, 3)))


def test_residual_names_bad_arguments(rng):
    x = rng.standard_normal((2, 3, 3))
    with pytest.raises(ValueError, match=r"^inner must be one of"):
        residual.forward(mlp.init(rng, 3, 4), x, inner="no_such_module")
    with pytest.raises(ValueError, match=r"^inner must be one of"):
        residual.init(rng, inner="residual", D=3)
    with pytest.raises(ValueError, match=r"^inner must map x to an output of x's shape"):
        residual.forward(linear.init(rng, 3, 2), x, inner="linear")


def test_losses_name_bad_arguments(rng):
    logits = rng.standard_normal((2, 3, 4))
    targets = rng.integers(0, 4, (2, 3))
    too_big = targets.copy()
    too_big[1, 2] = 4
    with pytest.raises(ValueError, match=r"^targets must lie in \[0, V=4\)"):
        cross_entropy.forward({}, logits, targets=too_big)
    with pytest.raises(ValueError, match=r"^targets must lie in \[0, V=4\)"):
        cross_entropy.forward({}, logits, targets=-np.ones_like(targets))
    with pytest.raises(ValueError, match=r"^targets must have shape \(2, 3\)"):
        cross_entropy.forward({}, logits, targets=targets[:, :2])
    with pytest.raises(ValueError, match=r"^targets must have an integer dtype"):
        cross_entropy.forward({}, logits, targets=targets.astype(float))
    with pytest.raises(ValueError, match=r"^logits must have at least 2 dimensions"):
        cross_entropy.forward({}, logits[0, 0], targets=np.array(1))
    with pytest.raises(ValueError, match=r"^logits must have shape \(B, T, V\) or \(N, V\)"):
        cross_entropy.forward({}, logits[None], targets=targets[None])
    with pytest.raises(ValueError, match=r"^params must be empty"):
        cross_entropy.forward({"W": np.ones(1)}, logits, targets=targets)
    _, cache = cross_entropy.forward({}, logits, targets=targets)
    with pytest.raises(ValueError, match=r"^dy must be a scalar"):
        cross_entropy.backward({}, cache, np.ones(2))

    y = rng.standard_normal((2, 3))
    with pytest.raises(ValueError, match=r"^target must have the same shape as y_pred"):
        mse.forward({}, y, target=y[:, :2])
    with pytest.raises(ValueError, match=r"^target must have the same shape as y_pred"):
        mse.forward({}, y, target=y[0])  # no broadcasting
    with pytest.raises(ValueError, match=r"^y_pred contains NaN"):
        mse.forward({}, np.full((2,), np.nan), target=np.zeros(2))
    _, cache = mse.forward({}, y, target=np.zeros_like(y))
    with pytest.raises(ValueError, match=r"^dy must be a scalar"):
        mse.backward({}, cache, np.ones((2, 3)))


# float32 in, float32 out for every layer's examples: tests/test_registry.py.


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mse_that_overflows_names_y_pred_and_target():
    """float32 differences of 1e20 square to inf: the loss came back inf without a word."""
    y, t = np.full(3, 1e20, np.float32), np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"^y_pred has float32 values up to 1e\+20, target has float32 values up "
                                         r"to 0: the squared error .* overflowed to inf or NaN \(float32 holds at "
                                         r"most 3.4e\+38\); scale them down, or use float64"):
        mse.forward({}, y, t)
    loss, cache = mse.forward({}, np.full(3, 1e19, np.float64), np.zeros(3))
    assert np.isfinite(loss)  # the same values fit in float64
    _, cache = mse.forward({}, np.full(3, 1e18, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"^dy has float32 values up to 1e\+30: the gradient dL/dy_pred overflowed"):
        mse.backward({}, cache, np.float32(1e30))


@pytest.mark.parametrize("module,init", [
    (linear, lambda rng: linear.init(rng, 3, 2)), (glu, lambda rng: glu.init(rng, 3, 2)),
    (mlp, lambda rng: mlp.init(rng, 3, 4)), (layernorm, lambda rng: layernorm.init(rng, 3)),
    (embedding, lambda rng: embedding.init(rng, 4, 3)), (causal_conv, lambda rng: causal_conv.init(rng, 3, 2))],
    ids=["linear", "glu", "mlp", "layernorm", "embedding", "causal_conv"])
def test_params_must_have_exactly_the_layers_keys_like_the_cells(rng, module, init):
    """A missing key gave a bare KeyError and an extra one was accepted; now one error names both."""
    params = init(rng)
    x = np.array([[0, 3, 1]]) if module is embedding else rng.standard_normal((1, 3, 3))
    y, cache = module.forward(params, x)
    first = sorted(params)[0]
    missing = {k: v for k, v in params.items() if k != first}
    extra = {**params, "bias": np.zeros(3)}
    for bad, what in ((missing, rf"missing \['{first}'\], unexpected \[\]"), (extra, r"missing \[\], unexpected \['bias'\]")):
        with pytest.raises(ValueError, match=rf"^params must have the keys \[.*\]: {what}$"):
            module.forward(bad, x)
        with pytest.raises(ValueError, match=rf"^params must have the keys \[.*\]: {what}$"):
            module.backward(bad, cache, y)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.float32, 2e-6)])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 1, 7), (3, 5), (64, 32)])
def test_layernorm_compiled_pass_equals_the_numpy_formulas(dtype, tol, shape):
    from minimal.layers import layernorm

    rng = np.random.default_rng(0)
    D = shape[-1]
    params = {"gamma": (1.0 + 0.5 * rng.standard_normal(D)).astype(dtype), "beta": rng.standard_normal(D).astype(dtype)}
    x = (3.0 + 2.0 * rng.standard_normal(shape)).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    y, c = layernorm.forward(params, x)
    y_ref, c_ref = layernorm._forward_numpy(params, x)
    for got, want in ((y, y_ref), (c.xhat, c_ref.xhat), (c.inv_std, c_ref.inv_std)):
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    dx, g = layernorm.backward(params, c, dy)
    dx_ref, g_ref = layernorm._backward_numpy(params, c_ref, dy)
    for got, want in ((dx, dx_ref), (g["gamma"], g_ref["gamma"]), (g["beta"], g_ref["beta"])):
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (3.0, 2.0), (100.0, 1.0), (1e4, 1.0), (0.0, 1e-3), (0.0, 1e3),
                                          (0.0, 1e19)])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 1, 7), (64, 32), (16, 128, 64), (4, 9, 300)])
def test_layernorm_float32_registers_are_within_a_few_roundings_of_the_float64_formulas(offset, scale, shape):
    """The float32 pair (``_layernorm_numba``'s ``_f32`` kernels) against the float64 formulas of the same float32
    inputs, each entry in units of 2^-24 times its scale: xhat and inv_std's |xhat| + 1 and 1 plus |mu| / sigma
    (the mean rounded to float32 once), y's the same times |gamma| plus |y|; dx (from the same float32 cache) r times
    |dy gamma| plus the row means of |dy gamma| and |dy gamma xhat| |xhat|; dgamma, dbeta the sums of
    |dy xhat|, |dy|. The largest seen over five seeds of these cases: 3.2 (y at D = 300); the bound is 8. At scale
    1e19 the float32 sum of squares overflows, and those rows run in float64 registers."""
    rng = np.random.default_rng(0)
    U, D = 2.0 ** -24, shape[-1]
    params = {"gamma": (1.0 + 0.5 * rng.standard_normal(D)).astype(np.float32),
              "beta": rng.standard_normal(D).astype(np.float32)}
    x = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    y, c = layernorm.forward(params, x)
    y64, c64 = layernorm._forward_numpy(p64, x.astype(np.float64))
    r, xh = c64.inv_std, np.abs(c64.xhat)
    mu_r = np.abs(x.astype(np.float64).mean(axis=-1, keepdims=True)) * r
    assert c.xhat.dtype == y.dtype == c.inv_std.dtype == np.float32
    assert np.all(np.abs(c.xhat - c64.xhat) <= 8 * U * (mu_r + xh + 1))
    assert np.all(np.abs(c.inv_std - r) <= 8 * U * r * (1 + mu_r))
    assert np.all(np.abs(y - y64) <= 8 * U * (np.abs(p64["gamma"]) * (mu_r + xh + 1) + np.abs(y64)))
    dx, g = layernorm.backward(params, c, dy)
    c32 = layernorm.Cache(c.xhat.astype(np.float64), c.inv_std.astype(np.float64))
    dx64, g64 = layernorm._backward_numpy(p64, c32, dy.astype(np.float64))
    dyg, xh32 = np.abs(dy * p64["gamma"]), np.abs(c32.xhat)
    scale_dx = c32.inv_std * (dyg + dyg.mean(axis=-1, keepdims=True)
                              + xh32 * (dyg * xh32).mean(axis=-1, keepdims=True))
    assert dx.dtype == np.float32 and np.all(np.abs(dx - dx64) <= 8 * U * scale_dx)
    sums = {"gamma": (np.abs(dy) * xh32).reshape(-1, D).sum(axis=0), "beta": np.abs(dy).reshape(-1, D).sum(axis=0)}
    for n in ("gamma", "beta"):
        assert g[n].dtype == np.float32 and np.all(np.abs(g[n] - g64[n]) <= 8 * U * sums[n])


def test_layernorm_runs_the_float32_kernels_on_float32_arrays_only(rng, monkeypatch):
    """float32 arrays take the ``_f32`` pair, float64 ones the float64-register pair (each the one that runs); a
    float32 forward whose eps is no normal float32 number takes the float64 one."""
    from minimal.layers import _layernorm_numba as k

    ran = []
    for name in ("layernorm_forward", "layernorm_backward", "layernorm_forward_f32", "layernorm_backward_f32"):
        monkeypatch.setattr(k, name, lambda *a, _f=getattr(k, name), _n=name: ran.append(_n) or _f(*a))
    for dtype, eps, suffixes in ((np.float32, 1e-5, ("_f32", "_f32")), (np.float64, 1e-5, ("", "")),
                                 (np.float32, 1e-50, ("", "_f32")), (np.float32, 1e39, ("", "_f32"))):
        ran.clear()
        params = {key: v.astype(dtype) for key, v in layernorm.init(rng, 5).items()}
        x = rng.standard_normal((2, 3, 5)).astype(dtype)
        x[0, 0] = 7.0            # a constant row: y = beta there, not 0 / 0 (an eps of 1e-50 is 0 in float32)
        y, c = layernorm.forward(params, x, eps=eps)
        assert np.all(np.isfinite(y)) and np.array_equal(y[0, 0], params["beta"])
        layernorm.backward(params, c, np.ones_like(y))
        assert ran == ["layernorm_forward" + suffixes[0], "layernorm_backward" + suffixes[1]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k", [((2, 7, 3), 4), ((3, 1, 5), 4), ((1, 3, 2), 4), ((2, 5, 2), 1),
                                     ((16, 128, 64), 4)])
def test_causal_conv_compiled_pass_equals_the_numpy_formulas(dtype, shape, k):
    """y and dx bit for bit (the same products added in the same order and dtype); dW and db, summed in float64
    by the compiled pass, to the storage dtype's rounding of a sum of B T terms."""
    from minimal.layers import causal_conv

    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((k, shape[2])).astype(dtype), "b": rng.standard_normal(shape[2]).astype(dtype)}
    x, dy = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    y, c = causal_conv.forward(params, x)
    y_ref, c_ref = causal_conv._forward_numpy(params, x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, y_ref)
    dx, g = causal_conv.backward(params, c, dy)
    dx_ref, g_ref = causal_conv._backward_numpy(params, c_ref, dy)
    assert dx.dtype == g["W"].dtype == g["b"].dtype == dtype
    np.testing.assert_array_equal(dx, dx_ref)
    # each sum's float64 value, against which the NumPy reference's float32 sums carry their own rounding
    x64, dy64, T = x.astype(np.float64), dy.astype(np.float64), shape[1]
    terms = [dy64[:, j:] * x64[:, :T - j] if j < T else np.zeros((1, 1, shape[2])) for j in range(k)]   # tap j
    dW64 = np.stack([t.sum(axis=(0, 1)) for t in terms])
    np.testing.assert_allclose(g["W"], dW64.astype(dtype), rtol=0, atol=4 * np.finfo(dtype).eps * np.abs(dW64).max())
    np.testing.assert_allclose(g["b"], dy64.sum(axis=(0, 1)).astype(dtype), rtol=0,
                               atol=4 * np.finfo(dtype).eps * np.abs(dy64).sum(axis=(0, 1)).max())
    # and the NumPy reference, summed in the storage dtype, within the bound of such a sum of n = B T terms:
    # n eps Σ|terms| (Higham, Accuracy and Stability of Numerical Algorithms, Eq. 4.4)
    n, eps = shape[0] * T, np.finfo(dtype).eps
    abs_W = np.stack([np.abs(t).sum(axis=(0, 1)) for t in terms])
    np.testing.assert_array_less(np.abs(g["W"] - g_ref["W"]), n * eps * abs_W.max() + 1e-300)
    np.testing.assert_array_less(np.abs(g["b"] - g_ref["b"]), n * eps * np.abs(dy64).sum(axis=(0, 1)).max() + 1e-300)


def test_conv_and_layernorm_backward_refuse_params_of_another_width(rng):
    """The compiled passes index the params by the cached input's width: params of another width are refused by
    name, never read or written past their end."""
    from minimal.layers import causal_conv, layernorm

    x = rng.standard_normal((2, 5, 8))
    _, c = causal_conv.forward(causal_conv.init(rng, 8), x)
    with pytest.raises(ValueError, match=r"params are for C = 3 channels, but the cache holds x of shape \(2, 5, 8\)"):
        causal_conv.backward(causal_conv.init(rng, 3), c, x)
    _, c = layernorm.forward(layernorm.init(rng, 8), x)
    with pytest.raises(ValueError, match=r"gamma must have shape \(D=8\), got shape \(3,\)"):
        layernorm.backward(layernorm.init(rng, 3), c, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_backward_is_np_add_at_bit_for_bit(dtype):
    from minimal.layers import embedding, token_position_embedding as tpe

    rng = np.random.default_rng(0)
    x = rng.integers(0, 7, (16, 33))                     # many repeated ids
    dy = rng.standard_normal((16, 33, 5)).astype(dtype)
    p = {k: v.astype(dtype) for k, v in tpe.init(rng, 7, 5, 40).items()}
    want = np.zeros((7, 5), dtype)
    np.add.at(want, x, dy)
    for mod, params in ((embedding, {"E": p["E"]}), (tpe, p)):
        _, c = mod.forward(params, x)
        _, g = mod.backward(params, c, dy)
        assert g["E"].dtype == dtype
        np.testing.assert_array_equal(g["E"], want)
