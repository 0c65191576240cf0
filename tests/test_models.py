"""minimal.models: stacks of registered modules with the cell contract; and the architecture sweep built on it,
bit for bit the stack it carried before (a copy of that code is the reference below)."""
import numpy as np
import pytest

from minimal import models
from minimal.cells import gated_rnn, gru, lru, lstm
from minimal.experiments.zucchet import architectures as A
from minimal.gradcheck import TOLERANCE, check_function
from minimal.layers import linear
from minimal.models import Layer, Residual
from minimal.experiments.zucchet import stacks

EXAMPLES = models.examples(np.random.default_rng(0))


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_stack_backward_matches_finite_differences(ex):
    # eps 1e-5 (the helper's default 1e-6): a stack's loss is larger than one cell's, and the central difference's
    # rounding error with it (the second LRU's nu_log: 3e-6 at eps 1e-6, 7e-8 at 1e-5, 1e-8 at 1e-4)
    errors = check_function(models.forward, models.backward, ex.params, ex.x, ex.kwargs, eps=1e-5)
    assert max(errors.values()) < TOLERANCE, errors


@pytest.mark.parametrize("ex", [e for e in EXAMPLES if e.kwargs["readout"] == "all"],
                         ids=[e.name for e in EXAMPLES if e.kwargs["readout"] == "all"])
def test_readout_last_is_the_last_step_of_readout_all_gradients_included(ex):
    spec = ex.kwargs["spec"]
    y, c = models.forward(ex.params, ex.x, spec)
    y1, c1 = models.forward(ex.params, ex.x, spec, readout="last")
    np.testing.assert_allclose(y1, y[:, -1:], rtol=1e-11, atol=1e-12)
    dy = np.zeros_like(y)
    dy[:, -1:] = np.random.default_rng(1).standard_normal(y1.shape)
    dx, g = models.backward(ex.params, c, dy)
    dx1, g1 = models.backward(ex.params, c1, dy[:, -1:])
    np.testing.assert_allclose(dx1, dx, rtol=1e-10, atol=1e-12)
    for k in g:
        np.testing.assert_allclose(g1[k], g[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_params_are_namespaced_by_position_and_scaled_once():
    spec = (Layer("linear", {"D_in": 3, "D_out": 4}, scale={"W": 0.0}),
            Residual((Layer("layernorm", {"D": 4}), Layer("mlp", {"D_in": 4, "H": 5}))),
            Layer("gated_rnn", {"d_in": 4, "d_hidden": 2, "d_out": 1}))
    p = models.init(np.random.default_rng(0), spec, dtype="float32")
    assert list(p)[:6] == ["0.W", "0.b", "1.0.gamma", "1.0.beta", "1.1.W_1", "1.1.b_1"]
    assert "2.nu" in p and all(v.dtype == np.float32 for v in p.values())
    assert not p["0.W"].any()
    # the same rng draws as the modules' own inits, in order (the zeroed W still consumed its draws)
    rng = np.random.default_rng(0)
    linear.init(rng, 3, 4)
    from minimal.layers import mlp
    np.testing.assert_array_equal(p["1.1.W_1"], mlp.init(rng, 4, 5)["W_1"].astype(np.float32))
    assert models.n_params(p) == 3 * 4 + 4 + 2 * 4 + 4 * 5 + 5 + 5 * 4 + 4 + 2 * 2 * 4 + 2 + 2 * 2 * 2 + 2


def test_bad_specs_name_themselves():
    with pytest.raises(ValueError, match="no_such_cell"):
        models.init(np.random.default_rng(0), (Layer("no_such_cell"),))
    with pytest.raises(ValueError, match="scale names 'V'"):
        models.init(np.random.default_rng(0), (Layer("linear", {"D_in": 2, "D_out": 2}, scale={"V": 2.0}),))
    spec = (Residual((Layer("linear", {"D_in": 2, "D_out": 3}),)),)
    p = models.init(np.random.default_rng(0), spec)
    with pytest.raises(ValueError, match="keep its input's shape"):
        models.forward(p, np.zeros((1, 2, 2)), spec)
    with pytest.raises(ValueError, match="non-empty tuple"):
        models.init(np.random.default_rng(0), ())


def test_a_stack_scans_its_input_params_and_dy_once_and_names_what_holds_nan(monkeypatch):
    """NaN or inf in x, a param or dy is named by the stack on entry; inside, the layers check shapes and dtypes
    but do not scan their inputs (validate.checked_values): the stack scans each layer's output once and the
    gradients at the end. Outside a stack each layer still scans."""
    import sys
    from minimal import validate
    from minimal.validate import InputError

    spec = (Layer("linear", {"D_in": 2, "D_out": 3}),
            Residual((Layer("layernorm", {"D": 3}), Layer("mingru", {"d_in": 3, "d_hidden": 3}))))
    p = models.init(np.random.default_rng(0), spec)
    x = np.random.default_rng(1).standard_normal((2, 4, 2))
    y, c = models.forward(p, x, spec)
    with pytest.raises(InputError, match=r"^x contains NaN or inf$"):
        models.forward(p, np.where(x > 0, np.nan, x), spec)
    bad = {**p, "1.1.W_z": np.full_like(p["1.1.W_z"], np.inf)}
    with pytest.raises(InputError, match=r"^params\['1.1.W_z'\] contains NaN or inf$"):
        models.forward(bad, x, spec)
    with pytest.raises(InputError, match=r"^params\['1.1.W_z'\] contains NaN or inf$"):
        models.backward(bad, c, np.ones_like(y))
    with pytest.raises(InputError, match=r"^dy contains NaN or inf$"):
        models.backward(p, c, np.full_like(y, np.nan))
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., D_in=2\)"):   # shapes: still checked inside
        models.forward(p, x[..., :1], spec)
    scans = []          # the functions that called np.isfinite
    real = np.isfinite
    monkeypatch.setattr(np, "isfinite", lambda a: scans.append(sys._getframe(1).f_code.co_name) or real(a))
    models.backward(p, models.forward(p, x, spec)[1], np.ones_like(y))
    monkeypatch.undo()
    assert "check_array" not in scans
    # x and each param on entry to forward, dy and each param on entry to backward
    assert scans.count("check_finite_values") == 2 * len(p) + 2
    assert not validate.values_checked()
    with pytest.raises(InputError, match="x contains NaN or inf"):   # a layer alone still scans
        linear.forward({"W": p["0.W"], "b": p["0.b"]}, np.full((2, 4, 2), np.nan))


def test_an_overflow_a_gate_would_absorb_is_named_before_the_gate():
    """A GRU's gates saturate on an inf input (σ(inf) = 1, tanh(inf) = 1) and give a finite output: the inf is
    named where it arose, the output of the layer before the GRU, or inside a block its LayerNorm's output."""
    from minimal.validate import OverflowInputError

    spec = (Layer("linear", {"D_in": 2, "D_out": 3}), Layer("gru", {"d_in": 3, "d_hidden": 2}))
    p = models.init(np.random.default_rng(0), spec, dtype="float32")
    p["0.W"] = np.full((2, 3), 3e38, np.float32)
    x = np.ones((1, 3, 2), np.float32)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(
            OverflowInputError, match=r"the output of layer 0 \(linear\) overflowed"):
        models.forward(p, x, spec)
    block = (Residual((Layer("linear", {"D_in": 2, "D_out": 2}),)),
             Layer("min_block", {"D": 2, "kind": "gru", "expansion": 1, "k": None}, {"kind": "gru"}))
    p = models.init(np.random.default_rng(0), block, dtype="float32")
    p["1.rnn_ln.gamma"] = np.array([3e38, 1.0], np.float32)    # |x̂| = 1 at D = 2: γ x̂ + β = ±3e38 + 3e38
    p["1.rnn_ln.beta"] = np.array([3e38, 0.0], np.float32)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(
            OverflowInputError, match=r"the rnn sublayer's LayerNorm output overflowed"):
        models.forward(p, np.random.default_rng(1).standard_normal((2, 3, 2)).astype(np.float32), block)
    p = models.init(np.random.default_rng(0), block, dtype="float32")
    p["0.0.W"] = np.full((2, 2), 3e38, np.float32)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(
            OverflowInputError, match=r"the output of layer 0 \(linear\) in residual block 0 overflowed"):
        models.forward(p, np.ones((2, 3, 2), np.float32), block)


def test_an_overflow_inside_a_stack_is_named_with_the_layer_it_reached():
    """A layer that does not check its own result (linear) overflows: the stack's scan of that layer's output names
    it, with the stack's input and largest param; the backward's overflow is caught in the gradients."""
    from minimal.validate import OverflowInputError

    spec = (Layer("linear", {"D_in": 2, "D_out": 2}), Layer("linear", {"D_in": 2, "D_out": 2}))
    p = models.init(np.random.default_rng(0), spec, dtype="float32")
    p["1.W"] = np.full((2, 2), 3e38, np.float32)
    x = np.ones((1, 3, 2), np.float32)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(
            OverflowInputError, match=r"(?s)x has float32.*params\['1.W'\] \(the largest\).*the output of layer 1 "
                                      r"\(linear\) overflowed"):
        models.forward(p, x, spec)
    p["1.W"] = np.ones((2, 2), np.float32)
    y, c = models.forward(p, x, spec)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(
            OverflowInputError, match=r"(?s)dy has float32.*the gradients overflowed"):
        models.backward(p, c, np.full_like(y, 3e38))


# ------------------------------------------------- architectures: bit-identical to a hand-written stack
# The reference composes the cells by hand, as architectures.py did before it delegated to minimal.models, with the
# Sec. 3.3 set-up: the gated RNNs read the tokens directly; LSTM, GRU and LRU sit between a linear embedding and a
# linear readout, every width = hidden. The committed sweep results in data/zucchet/sweeps are keyed by job config,
# not by code, so they stay valid only if the numbers are the same.

def _ref_init_layer(rng, arch, d_in, d_out, hidden):
    if arch.startswith("gated_"):
        return gated_rnn.init(rng, d_in, hidden, d_out, recurrence=arch[6:])
    if arch == "lstm":
        return lstm.init(rng, d_in, hidden)
    if arch == "gru":
        return gru.init(rng, d_in, hidden)
    return lru.init(rng, d_in, d_state=hidden, d_out=d_out, d_model=hidden, variant=arch[4:], r_min=0.0,
                    max_phase=np.pi / 10)


def _ref_init(rng, arch, d_in, d_out, hidden, layers, readout_scale, dtype):
    params = {}
    if arch.startswith("gated_"):
        width = d_in
        for i in range(layers):
            p = _ref_init_layer(rng, arch, width, d_out if i == layers - 1 else hidden, hidden)
            params.update({f"l{i}/{k}": v for k, v in p.items()})
            width = hidden
        params[f"l{layers - 1}/D"] = params[f"l{layers - 1}/D"] * readout_scale
    else:
        params.update({f"embed/{k}": v for k, v in linear.init(rng, d_in, hidden).items()})
        for i in range(layers):
            params.update({f"l{i}/{k}": v for k, v in _ref_init_layer(rng, arch, hidden, hidden, hidden).items()})
        params.update({f"readout/{k}": v for k, v in linear.init(rng, hidden, d_out).items()})
        params["readout/W"] = params["readout/W"] * readout_scale
    return {k: np.asarray(v, dtype=dtype) for k, v in params.items()}


def _ref_cell(arch):
    return {"gated_diagonal": gated_rnn, "gated_dense": gated_rnn, "lstm": lstm, "gru": gru}.get(arch, lru)


def _sub(params, prefix):
    return {k[len(prefix) + 1:]: v for k, v in params.items() if k.startswith(prefix + "/")}


def _ref_forward(params, x, arch, readout, L):
    cell, kw = _ref_cell(arch), ({"variant": arch[4:]} if arch.startswith("lru_") else {})
    caches, h = [], x
    if cell is not gated_rnn:
        h, c = linear.forward(_sub(params, "embed"), h)
        caches.append(c)
    for i in range(L):
        last_kw = {"readout": "last"} if (readout == "last" and i == L - 1 and cell is gated_rnn) else {}
        h, c = cell.forward(_sub(params, f"l{i}"), h, **kw, **last_kw)
        caches.append(c)
    T_cut = h.shape[1] if (readout == "last" and cell is not gated_rnn) else None
    if T_cut is not None:
        h = h[:, -1:]
    if cell is not gated_rnn:
        h, c = linear.forward(_sub(params, "readout"), h)
        caches.append(c)
    return h, (caches, T_cut)


def _ref_backward(params, caches, dy, arch, L):
    cell, grads = _ref_cell(arch), {}
    caches, T_cut = list(caches[0]), caches[1]
    if cell is not gated_rnn:
        dy, g = linear.backward(_sub(params, "readout"), caches.pop(), dy)
        grads.update({f"readout/{k}": v for k, v in g.items()})
    if T_cut is not None:
        dy = np.concatenate([np.zeros(dy.shape[:1] + (T_cut - 1,) + dy.shape[2:], dy.dtype), dy], axis=1)
    offset = 0 if cell is gated_rnn else 1
    for i in reversed(range(L)):
        dy, g = cell.backward(_sub(params, f"l{i}"), caches[i + offset], dy)
        grads.update({f"l{i}/{k}": v for k, v in g.items()})
    if cell is not gated_rnn:
        dy, g = linear.backward(_sub(params, "embed"), caches[0], dy)
        grads.update({f"embed/{k}": v for k, v in g.items()})
    return dy, {k: grads[k] for k in params}


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("arch", stacks.ARCHS)
def test_architectures_stack_is_bit_identical_to_the_reference(arch, layers, dtype):
    p = stacks.init_model(np.random.default_rng(3), arch, 5, 3, 6, layers, 0.1, dtype)
    q = _ref_init(np.random.default_rng(3), arch, 5, 3, 6, layers, 0.1, dtype)
    assert list(p) == list(q) and all(_same(p[k], q[k]) for k in p)
    x = np.random.default_rng(4).standard_normal((3, 7, 5)).astype(dtype)
    for readout in ("all", "last"):
        y, c = stacks.model_forward(p, x, arch, readout)
        y_ref, c_ref = _ref_forward(q, x, arch, readout, layers)
        assert _same(y, y_ref), readout
        dy = np.random.default_rng(5).standard_normal(y.shape).astype(dtype)
        dx, g = stacks.model_backward(p, c, dy, arch)
        dx_ref, g_ref = _ref_backward(q, c_ref, dy, arch, layers)
        assert _same(dx, dx_ref), readout
        assert list(g) == list(g_ref) and all(_same(g[k], g_ref[k]) for k in g), readout


def test_the_reference_comparison_can_fail():
    # the bitwise test above must see a change in the last bit
    p = stacks.init_model(np.random.default_rng(3), "gated_diagonal", 5, 3, 6, 1)
    x = np.random.default_rng(4).standard_normal((3, 7, 5))
    y, _ = stacks.model_forward(p, x, "gated_diagonal")
    q = dict(p)
    q["l0/D"] = np.nextafter(q["l0/D"], np.inf)
    assert not _same(_ref_forward(q, x, "gated_diagonal", "all", 1)[0], y)
