"""Every registered cell honours the contract and passes its float64 gradient check (DESIGN.md)."""
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
    assert max(errors.values()) <= TOLERANCE, errors


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
