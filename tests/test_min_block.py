"""Feng et al.'s language-model layer (App. C.1) and its new parts: causal depthwise convolution, dropout, the
pre-LN block with a selectable recurrent sublayer; gradients, step mode = sequence, causality, dropout statistics."""
import numpy as np
import pytest

from minimal.cells import min_block, mingru, softmax_attention
from minimal.gradcheck import rel_error
from minimal.layers import causal_conv, dropout, layernorm, linear, mlp

# The float64 gradient checks, float32 and the T = 1 / odd T examples of causal_conv, dropout and min_block:
# tests/test_registry.py.


def test_examples_cover_every_kind():
    kinds = {ex.kwargs["kind"] for ex in min_block.examples(np.random.default_rng(0))}
    assert kinds == set(min_block.KINDS)


# ---------------------------------------------------------------- causal convolution

def test_conv_equals_the_defining_sum(rng):
    params = causal_conv.init(rng, 3, 4) | {"b": rng.standard_normal(3)}
    x = rng.standard_normal((2, 6, 3))
    y, _ = causal_conv.forward(params, x)
    ref = np.empty_like(y)
    for t in range(6):
        ref[:, t] = params["b"] + sum(params["W"][j] * x[:, t - j] for j in range(4) if t - j >= 0)
    assert rel_error(y, ref) <= 1e-15


@pytest.mark.parametrize("k", [1, 2, 4])
def test_conv_is_causal(rng, k):
    params = causal_conv.init(rng, 2, k)
    x = rng.standard_normal((2, 7, 2))
    y, _ = causal_conv.forward(params, x)
    for t in range(7):
        x2 = x.copy()
        x2[:, t] += 1.0
        y2, _ = causal_conv.forward(params, x2)
        np.testing.assert_array_equal(y2[:, :t], y[:, :t])               # nothing before t moves
        assert np.all(np.abs(y2[:, t:t + k] - y[:, t:t + k]) > 0)       # t .. t+k-1 do (weights are non-zero)
        np.testing.assert_array_equal(y2[:, t + k:], y[:, t + k:])       # the kernel is k taps long


@pytest.mark.parametrize("k,T", [(4, 7), (4, 2), (1, 3), (3, 1)])
def test_conv_steps_equal_the_sequence(rng, k, T):
    params = causal_conv.init(rng, 3, k) | {"b": rng.standard_normal(3)}
    x = rng.standard_normal((2, T, 3))
    y, _ = causal_conv.forward(params, x)
    buffer = None
    for t in range(T):
        y_t, buffer = causal_conv.step_forward(params, buffer, x[:, t])
        assert buffer.shape == (2, k - 1, 3)
        assert rel_error(y_t, y[:, t]) <= 1e-15
    np.testing.assert_array_equal(causal_conv.init_buffer(params, 2), np.zeros((2, k - 1, 3)))


def test_conv_names_bad_arguments(rng):
    params = causal_conv.init(rng, 3)
    with pytest.raises(ValueError, match=r"^x must have shape \(B, T, C=3\)"):
        causal_conv.forward(params, rng.standard_normal((2, 4, 2)))
    with pytest.raises(ValueError, match=r"^buffer must have shape \(B=2, k-1=3, C=3\)"):
        causal_conv.step_forward(params, np.zeros((2, 2, 3)), rng.standard_normal((2, 3)))
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1"):
        causal_conv.init(rng, 3, 0)


# ---------------------------------------------------------------- dropout

@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_dropout_statistics(rate):
    x = np.ones((4, 500, 100))                     # n = 200,000
    y, cache = dropout.forward({}, x, rate, rng=0)
    assert set(np.unique(y)) == {0.0, 1.0 / (1.0 - rate)}
    n = x.size
    dropped = np.mean(y == 0.0)
    assert abs(dropped - rate) <= 5 * np.sqrt(rate * (1 - rate) / n)     # Bernoulli(rate) per entry
    assert abs(y.mean() - 1.0) <= 5 * np.sqrt(rate / (1 - rate) / n)     # E[y] = x (inverted scaling)


def test_dropout_seed_determinism_and_generator(rng):
    x = rng.standard_normal((3, 5, 4))
    y1, _ = dropout.forward({}, x, 0.5, rng=11)
    y2, _ = dropout.forward({}, x, 0.5, rng=11)
    y3, _ = dropout.forward({}, x, 0.5, rng=12)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(y1, y3)
    gen = np.random.default_rng(11)
    a, _ = dropout.forward({}, x, 0.5, rng=gen)    # a Generator is advanced: the next call draws a new mask
    b, _ = dropout.forward({}, x, 0.5, rng=gen)
    np.testing.assert_array_equal(a, y1)           # default_rng(seed) and the Generator draw the same first mask
    assert not np.array_equal(a, b)


def test_dropout_backward_uses_the_forward_mask(rng):
    x = rng.standard_normal((2, 6, 3))
    y, cache = dropout.forward({}, x, 0.4, rng=5)
    dy = rng.standard_normal(x.shape)
    dx, grads = dropout.backward({}, cache, dy)
    assert grads == {}
    np.testing.assert_array_equal(dx == 0.0, y == 0.0)
    np.testing.assert_allclose(dx[y != 0], dy[y != 0] / 0.6, rtol=1e-15)


def test_dropout_identity_in_evaluation_and_at_rate_zero(rng):
    x = rng.standard_normal((2, 3, 4))
    for kw in ({"rate": 0.5, "train": False}, {"rate": 0.0}, {"rate": 0}):
        y, cache = dropout.forward({}, x, rng=1, **kw)
        assert y is x and cache.mask is None
        dy = rng.standard_normal(x.shape)
        assert dropout.backward({}, cache, dy)[0] is dy


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, True, "0.5", None, np.nan])
def test_dropout_rejects_a_rate_outside_0_1(rng, rate):
    with pytest.raises(ValueError, match=r"^rate must be a number in \[0, 1\)"):
        dropout.forward({}, rng.standard_normal((2, 3)), rate)


def test_dropout_names_other_bad_arguments(rng):
    with pytest.raises(ValueError, match=r"^params must be empty"):
        dropout.forward({"W": np.ones(1)}, rng.standard_normal((2, 3)), 0.1)
    with pytest.raises(ValueError, match=r"^train must be a bool"):
        dropout.forward({}, rng.standard_normal((2, 3)), 0.1, train="yes")


# ---------------------------------------------------------------- the block

def _block(rng, kind, k=4, D=4, **kw):
    params = min_block._randomised(rng, min_block.init(rng, D, kind, k=k, **kw))
    return params, rng.standard_normal((2, 6, D))


def test_block_params_are_namespaced_by_sublayer(rng):
    params = min_block.init(rng, 8, "mingru")
    assert set(params) == {"rnn_ln.gamma", "rnn_ln.beta", "rnn.W_z", "rnn.W_h", "rnn.b_z", "rnn.b_h",
                           "rnn_out.W", "rnn_out.b", "conv_ln.gamma", "conv_ln.beta", "conv.W", "conv.b",
                           "mlp_ln.gamma", "mlp_ln.beta", "mlp.W_1", "mlp.b_1", "mlp.W_2", "mlp.b_2"}
    assert params["rnn.W_z"].shape == (16, 8)          # expansion 2 (App. C.2)
    assert params["rnn_out.W"].shape == (16, 8)
    assert params["conv.W"].shape == (4, 8)            # kernel size 4 (App. C.1)
    assert params["mlp.W_1"].shape == (8, 32)          # 4 D
    assert not any(k.startswith("conv") for k in min_block.init(rng, 8, "attention", k=None))


def test_block_is_rnn_then_conv_then_mlp_each_pre_ln_and_residual(rng):
    # The same block written out from its parts: the App. C.1 order as read in the module docstring.
    params, x = _block(rng, "mingru")

    def sub(prefix):
        return {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}

    h = x + linear.forward(sub("rnn_out."), mingru.forward(sub("rnn."), layernorm.forward(sub("rnn_ln."), x)[0])[0])[0]
    h = h + causal_conv.forward(sub("conv."), layernorm.forward(sub("conv_ln."), h)[0])[0]
    h = h + mlp.forward(sub("mlp."), layernorm.forward(sub("mlp_ln."), h)[0])[0]
    y, _ = min_block.forward(params, x, kind="mingru")
    assert rel_error(y, h) <= 1e-14


@pytest.mark.parametrize("kind,k,log_space", [("mingru", 4, False), ("mingru", 4, True), ("minlstm", 3, False),
                                              ("minlstm", None, True), ("gru", 4, False), ("lstm", 2, False),
                                              ("attention", 4, False), ("attention", None, False)])
def test_block_steps_equal_the_sequence(rng, kind, k, log_space):
    params, x = _block(rng, kind, k=k)
    y, _ = min_block.forward(params, x, kind=kind, log_space=log_space, dropout_rate=0.3, rng=0, train=False)
    state = None
    for t in range(x.shape[1]):
        y_t, state = min_block.step_forward(params, state, x[:, t], kind=kind, log_space=log_space)
        assert rel_error(y_t, y[:, t]) <= 1e-12, (kind, t)
    if kind == "attention":
        assert isinstance(state.rnn, softmax_attention.KVState) and state.rnn.K.shape[1] == x.shape[1]
    assert (state.conv is None) == (k is None)


@pytest.mark.parametrize("kind", min_block.KINDS)
def test_block_is_causal(rng, kind):
    params, x = _block(rng, kind)
    y, _ = min_block.forward(params, x, kind=kind)
    for t in (0, 3, 5):
        x2 = x.copy()
        x2[:, t] += rng.standard_normal(x.shape[2])
        y2, _ = min_block.forward(params, x2, kind=kind)
        np.testing.assert_array_equal(y2[:, :t], y[:, :t])
        assert np.all(y2[:, t] != y[:, t])


def test_block_dropout_is_seeded_and_off_in_evaluation(rng):
    params, x = _block(rng, "minlstm")
    y0, _ = min_block.forward(params, x, kind="minlstm")
    y_eval, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=1, train=False)
    np.testing.assert_array_equal(y_eval, y0)
    a, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=1)
    b, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=1)
    c, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, y0)
    gen = np.random.default_rng(1)
    g1, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=gen)
    g2, _ = min_block.forward(params, x, kind="minlstm", dropout_rate=0.5, rng=gen)
    np.testing.assert_array_equal(g1, a)
    assert not np.array_equal(g1, g2)


def test_block_names_bad_arguments(rng):
    params, x = _block(rng, "mingru")
    with pytest.raises(ValueError, match=r"^kind must be one of"):
        min_block.forward(params, x, kind="mamba")
    with pytest.raises(ValueError, match=r"^params hold rnn weights \['W_h', 'W_z'\], but kind 'minlstm'"):
        min_block.forward(params, x, kind="minlstm")
    with pytest.raises(ValueError, match=r"^x must have shape \(B, T, D=4\)"):
        min_block.forward(params, x[..., :3], kind="mingru")
    with pytest.raises(ValueError, match=r"^rate must be a number in \[0, 1\)"):
        min_block.forward(params, x, kind="mingru", dropout_rate=1.0)
    gparams, _ = _block(rng, "gru")
    with pytest.raises(ValueError, match=r"^log_space applies to kinds mingru and minlstm only"):
        min_block.forward(gparams, x, kind="gru", log_space=True)
    with pytest.raises(ValueError, match=r"^x_t must have shape \(B, D=4\)"):
        min_block.step_forward(params, None, x, kind="mingru")
