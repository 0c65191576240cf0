"""Every registered cell honours the contract (DESIGN.md): its float64 gradient check covers the input and every
parameter; float32 in gives float32 out (training runs in float32, TOOLING-NOTES: no constant may silently promote
to float64); its examples include T = 1 and an odd T > 1. The cells' own test files test what is particular to
each (modes, step forms, the papers' claims)."""
import numpy as np
import pytest

from minimal.cells import REGISTRY, get
from minimal.gradcheck import TOLERANCE, check_cell

CASES = [(name, i) for name, mod in REGISTRY.items()
         for i in range(len(mod.examples(np.random.default_rng(0))))]


def test_registry_lists_the_design_cells():
    expected = {"lsa", "softmax_attention", "gated_rnn", "lru", "lstm", "gru", "mingru", "minlstm", "gril",
                "linear", "glu", "mlp", "layernorm", "embedding", "residual", "cross_entropy", "mse"}
    assert expected <= set(REGISTRY), f"missing: {sorted(expected - set(REGISTRY))}"


@pytest.mark.parametrize("name,i", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_every_example_passes_gradcheck(name, i):
    module = REGISTRY[name]
    ex = module.examples(np.random.default_rng(0))[i]
    for p in ex.params.values():
        assert p.dtype == np.float64
    errors = check_cell(module, ex)
    assert set(errors) == set(ex.params) | ({"x"} if ex.x.dtype.kind == "f" else set())
    assert max(errors.values()) <= TOLERANCE, errors


def _float32(v):
    return v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v


@pytest.mark.parametrize("name,i", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_float32_stays_float32(name, i):
    module = REGISTRY[name]
    ex = module.examples(np.random.default_rng(0))[i]
    params = {k: p.astype(np.float32) for k, p in ex.params.items()}
    y, cache = module.forward(params, _float32(ex.x), **{k: _float32(v) for k, v in ex.kwargs.items()})
    dx, grads = module.backward(params, cache, np.ones_like(y))
    assert np.asarray(y).dtype == np.float32 and (dx is None or dx.dtype == np.float32)
    assert all(g.dtype == np.float32 for g in grads.values())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_examples_include_T1_and_an_odd_T(name):
    Ts = {ex.x.shape[1] for ex in REGISTRY[name].examples(np.random.default_rng(0)) if ex.x.ndim >= 2}
    assert 1 in Ts and any(T % 2 == 1 and T > 1 for T in Ts), Ts


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_init_returns_named_float_arrays(name):
    module = REGISTRY[name]
    ex = module.examples(np.random.default_rng(1))[0]
    y, cache = module.forward(ex.params, ex.x, **ex.kwargs)
    dx, grads = module.backward(ex.params, cache, np.ones_like(y))
    assert set(grads) == set(ex.params)
    assert all(isinstance(v, np.ndarray) for v in ex.params.values())


def test_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match="name must be one of"):
        get("no_such_cell")
