"""Every registered cell says its run-time choices with the words of ``minimal.conventions`` (docs/conventions.md),
with the documented values only: ``mode`` parallel / sequential (both run and agree), ``method`` every scan algorithm
(they agree wherever a scan runs), ``backend`` numpy / numba / cuda (they agree), GRIL's ``kernel``; None is the
table's default, decided in that one table; an unknown value, or an old spelling, raises an error that names the
argument (and the new spelling). The cells are read from ``minimal.cells.REGISTRY`` and their own ``examples``."""
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from minimal import conventions
from minimal import scan
from minimal.scan import reference
from minimal.cells import REGISTRY, gril, lru, lsa, mingru, softmax_attention
from minimal.conventions import CHOICES, DEFAULTS
from minimal.gradcheck import rel_error
from minimal.validate import InputError

ROOT = Path(__file__).resolve().parents[1]
WORDS = tuple(CHOICES)
EXACT = 1e-12   # two forms of one float64 computation: rounding only


def _words(module):
    return [w for w in WORDS if w in inspect.signature(module.forward).parameters]


def _cells(word):
    return sorted(name for name, module in REGISTRY.items() if word in _words(module))


def _examples(name):
    """The cell's examples with the four words taken out of their kwargs (``out`` too: it belongs to one mode)."""
    return [(ex, {k: v for k, v in ex.kwargs.items() if k not in WORDS + ("out",)})
            for ex in REGISTRY[name].examples(np.random.default_rng(0))]


def _run(name, ex, kwargs):
    """y and the gradients (dx, then each param's) of the example for one fixed dy."""
    module = REGISTRY[name]
    y, cache = module.forward(ex.params, ex.x, **kwargs)
    dy = np.random.default_rng(1).standard_normal(np.shape(y))
    dx, grads = module.backward(ex.params, cache, dy)
    return [y, dx] + [grads[k] for k in sorted(grads)]


def _agree(got, want):
    return max(rel_error(g, w) for g, w in zip(got, want))


def test_the_cells_that_make_these_choices_are_found_in_the_registry():
    assert {"lsa", "softmax_attention", "mingru", "minlstm", "gril", "lru"} <= set(_cells("mode"))
    assert {"mingru", "minlstm", "gated_rnn", "gril"} <= set(_cells("method")) <= set(_cells("backend"))
    assert _cells("kernel") == ["gril"]


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if _words(REGISTRY[n])))
def test_every_word_defaults_to_none_so_the_table_decides(name):
    params = inspect.signature(REGISTRY[name].forward).parameters
    assert {w: params[w].default for w in _words(REGISTRY[name])} == {w: None for w in _words(REGISTRY[name])}


@pytest.mark.parametrize("name", _cells("mode"))
def test_parallel_and_sequential_mode_run_and_agree(name):
    for ex, kw in _examples(name):
        par = _run(name, ex, {**kw, "mode": "parallel"})
        seq = _run(name, ex, {**kw, "mode": "sequential"})
        assert _agree(par, seq) <= EXACT, ex.name


@pytest.mark.parametrize("name", _cells("method"))
def test_every_scan_algorithm_runs_where_a_scan_runs_and_they_agree(name, monkeypatch):
    """Where the call runs a scan, every method is accepted on both CPU backends, reaches ``minimal.scan`` and
    gives the same values; where it runs none (sequential mode, log space, a fused kernel, ...) only None and the
    default are accepted (not silently ignored), and the refusal starts with ``method``."""
    seen = []
    resolve = scan.resolve_method
    monkeypatch.setattr(scan, "resolve_method", lambda method, backend, where: seen.append(method) or
                        resolve(method, backend, where))
    runs_every_method = 0
    for ex, kw in _examples(name):
        want = _run(name, ex, {**kw, "backend": "numpy"})
        for backend in ("numpy", "numba"):
            accepted = []
            for method in CHOICES["method"]:
                seen.clear()
                try:
                    got = _run(name, ex, {**kw, "method": method, "backend": backend})
                except InputError as e:
                    assert re.match(rf"method={method!r} has no effect", str(e)), (ex.name, backend, str(e))
                    continue
                accepted.append(method)
                assert _agree(got, want) <= EXACT, (ex.name, backend, method)
                assert method == DEFAULTS["method"] or method in seen, f"{ex.name}: method={method!r} was ignored"
            assert DEFAULTS["method"] in accepted and accepted in ([DEFAULTS["method"]], list(CHOICES["method"]))
            runs_every_method += accepted == list(CHOICES["method"])
    assert runs_every_method > 0, f"{name}: no example runs a scan, so method is never tested"


@pytest.mark.parametrize("name", _cells("backend"))
def test_numpy_and_numba_backends_agree_and_cuda_is_accepted(name):
    for ex, kw in _examples(name):
        assert _agree(_run(name, ex, {**kw, "backend": "numba"}), _run(name, ex, {**kw, "backend": "numpy"})) <= EXACT
    pytest.importorskip("cuda_kernels.scan")          # the CUDA simulator on CPU machines (tests/conftest.py)
    ex, kw = next((ex, kw) for ex, kw in _examples(name) if ex.kwargs.get("mode", "parallel") == "parallel")
    assert _agree(_run(name, ex, {**kw, "backend": "cuda"}), _run(name, ex, {**kw, "backend": "numpy"})) <= EXACT


def test_gril_fused_and_unfused_kernels_agree():
    for ex, kw in _examples("gril"):
        if ex.kwargs["mode"] == "parallel" and ex.kwargs.get("readout", "window") == "window":  # fused: no "state"
            assert _agree(_run("gril", ex, {**kw, "kernel": "fused"}),
                          _run("gril", ex, {**kw, "kernel": "unfused"})) <= EXACT, ex.name


@pytest.mark.parametrize("name,word", [(n, w) for w in WORDS for n in _cells(w)])
def test_an_unknown_value_is_refused_naming_the_argument_and_its_values(name, word):
    for ex, kw in _examples(name):
        with pytest.raises(InputError, match=rf"^{word} must be one of {re.escape(str(list(CHOICES[word])))}"):
            REGISTRY[name].forward(ex.params, ex.x, **kw, **{word: "bogus"})


@pytest.mark.parametrize("module,old", [(lsa, "recurrent"), (softmax_attention, "rnn"), (mingru, "recurrent")])
def test_an_old_mode_value_is_refused_with_its_new_spelling(module, old):
    ex = module.examples(np.random.default_rng(0))[0]
    kw = {k: v for k, v in ex.kwargs.items() if k != "mode"}
    with pytest.raises(InputError, match=rf"^mode must be one of .* {old!r} is now spelled 'sequential'"):
        module.forward(ex.params, ex.x, **kw, mode=old)


def test_an_old_meaning_of_method_is_refused_with_the_new_name():
    ex = lru.examples(np.random.default_rng(0))[0]
    with pytest.raises(InputError, match=r"^lru\.forward: `method` now names the scan algorithm.* is `mode`"):
        lru.forward(ex.params, ex.x, variant=ex.kwargs["variant"], method="sequential")
    # GRIL's fused/unfused switch is ``kernel``: a scan algorithm with the fused kernel says so
    ex = next(e for e in gril.examples(np.random.default_rng(0)) if e.kwargs["backend"] == "numba")
    with pytest.raises(InputError, match=r"^method='blelloch' has no effect .* kernel='unfused'"):
        gril.forward(ex.params, ex.x, s=ex.kwargs["s"], method="blelloch")


def test_none_means_the_default_of_the_one_table(monkeypatch):
    """Change the table, and every call that passed None follows it: backend "numpy" + method "blelloch" send
    minGRU, the gated RNN and GRIL (its kernel "auto" then unfused) through NumPy's Blelloch scan."""
    calls = []
    blelloch = reference.blelloch
    monkeypatch.setattr(reference, "blelloch", lambda *a: calls.append(1) or blelloch(*a))
    monkeypatch.setitem(conventions.DEFAULTS, "backend", "numpy")
    monkeypatch.setitem(conventions.DEFAULTS, "method", "blelloch")
    for name, example in (("mingru", "parallel-T5-h0"), ("gated_rnn", "diagonal-T5"), ("gril", "parallel-T5-w2-s1")):
        ex, kw = next((ex, kw) for ex, kw in _examples(name) if ex.name == example)
        before = len(calls)
        REGISTRY[name].forward(ex.params, ex.x, **kw)
        assert len(calls) == before + 1, name
    monkeypatch.setitem(conventions.DEFAULTS, "mode", "sequential")
    for name in ("lsa", "gril", "mingru", "lru"):
        ex, kw = _examples(name)[0]
        assert REGISTRY[name].forward(ex.params, ex.x, **kw)[1].mode == "sequential", name


def _doc_table():
    """{word: (values, default)} from the table rows of docs/conventions.md: | `word` | `"a"`, `"b"` | `"a"` | ..."""
    rows = {}
    for line in (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`\w+`", cells[0]) and re.fullmatch(r'`"\w+"`', cells[2]):
            rows[cells[0].strip("`")] = (tuple(re.findall(r'`"(\w+)"`', cells[1])), cells[2].strip('`"'))
    return rows


def test_docs_conventions_is_the_table_in_the_code_and_is_pointed_to():
    assert _doc_table() == {w: (CHOICES[w], DEFAULTS[w]) for w in WORDS}
    import minimal
    assert "docs/conventions.md" in minimal.__doc__
    assert "docs/conventions.md" in (ROOT / "README.md").read_text(encoding="utf-8")
