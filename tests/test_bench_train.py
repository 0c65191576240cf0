"""``python -m minimal bench train``: the bookkeeping (minima over interleaved rounds, ratios to torch's fastest
version, the table), the project's training step, and, only where PyTorch is installed, the float64 check that
each torch twin computes our model. No speed is asserted here (timings live in the benchmark's printout)."""
import importlib.util

import numpy as np
import pytest

from minimal.bench import rounds, train as bt

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def test_minima_are_taken_per_part_over_rounds_after_the_warmup():
    times = iter([{"step": 9.0}, {"step": 9.0},                      # warm-up: never counted
                  {"step": 3.0, "update": 1.0}, {"step": 2.0, "update": 1.5}, {"step": 4.0, "update": 0.5}])
    row = {"name": "m", "ours": {}}
    rounds.interleaved_minima([(row, "ours", None, lambda: next(times))], repeats=3, log=lambda s: None)
    assert {k: v for k, v in row["ours"].items() if k != "page faults"} == {
        "step": 2.0, "update": 0.5, "step median": 3.0, "update median": 1.0}
    assert row["ours"]["page faults"] >= 0


def test_rounds_interleave_every_runner_once_per_round():
    calls = []
    row = {"name": "m", "ours": {}, "theirs": {"a": {}, "b": {}}}
    runners = [(row, "ours", None, lambda: calls.append("ours") or {"step": 1.0}),
               (row, "theirs", "a", lambda: calls.append("a") or {"step": 1.0}),
               (row, "theirs", "b", lambda: calls.append("b") or {"step": 1.0})]
    rounds.interleaved_minima(runners, repeats=2, log=lambda s: None, warmup=1, shuffle=False)
    assert calls == ["ours", "a", "b"] * 3
    calls.clear()
    rounds.interleaved_minima(runners, repeats=20, log=lambda s: None, warmup=1)
    per_round = [calls[i:i + 3] for i in range(3, len(calls), 3)]
    assert calls[:3] == ["ours", "a", "b"] and all(sorted(r) == ["a", "b", "ours"] for r in per_round)
    # shuffled: our first call does not always come after the same runner (the last of the round before, or the
    # one before it in its round)
    before_ours = {(prev[-1] if r.index("ours") == 0 else r[r.index("ours") - 1])
                   for prev, r in zip([calls[:3]] + per_round, per_round)}
    assert {"a", "b"} == before_ours and len({tuple(r) for r in per_round}) > 1
    # a burst's first call always follows another runner's, also across the rounds' boundaries
    assert all(calls[i] != calls[i - 1] for i in range(3, len(calls)))


def test_a_burst_runs_each_runner_in_a_row_and_its_first_call_is_the_interleaved_sample():
    calls = []
    seq = {"ours": iter([9.0, 5.0, 1.0, 2.0, 6.0, 1.5, 3.0]), "a": iter([9.0, 7.0, 4.0, 4.5, 8.0, 3.5, 5.0])}

    def runner(name):
        return lambda: calls.append(name) or {"step": next(seq[name])}

    row = {"name": "m", "ours": {}, "theirs": {"a": {}}}
    rounds.interleaved_minima([(row, "ours", None, runner("ours")), (row, "theirs", "a", runner("a"))], repeats=2,
                              log=lambda s: None, warmup=1, burst=3, shuffle=False)
    assert calls == ["ours", "a"] + ["ours"] * 3 + ["a"] * 3 + ["ours"] * 3 + ["a"] * 3
    # ours: bursts (5, 1, 2) and (6, 1.5, 3); first calls 5 and 6, the others 1, 2, 1.5, 3
    assert row["ours"]["step"] == 5.0 and row["ours"]["step median"] == 5.5
    assert row["ours"]["step warm"] == 1.0 and row["ours"]["step warm median"] == 1.75
    assert row["theirs"]["a"]["step"] == 7.0 and row["theirs"]["a"]["step warm"] == 3.5
    bt.add_ratios([row])
    assert row["ratio"] == pytest.approx(5.0 / 7.0) and row["ratio warm"] == pytest.approx(1.0 / 3.5)
    table = bt.format_train_table([{**row, "checks": {"a": {"max_rel": 0.0, "equal": True}},
                                     "ours": {**row["ours"], "forward+backward": 1.0, "update": 0.1}}])
    assert "warm ms" in table and "0.29" in table    # the warm ratio, 1 / 3.5


def test_page_faults_are_counted_on_each_burst_s_first_call_only(monkeypatch):
    counter = iter(range(0, 10 ** 6, 10))               # each _page_faults() read: 0, 10, 20, ...
    extra = iter([0, 500, 500, 0, 500, 500])            # faults each call adds: the first of each burst none
    shift = [0]

    def step():
        shift[0] += next(extra)
        return {"step": 1.0}

    monkeypatch.setattr(rounds, "_page_faults", lambda: next(counter) + shift[0])
    row = {"name": "m", "ours": {}}
    rounds.interleaved_minima([(row, "ours", None, step)], repeats=2, log=lambda s: None, warmup=0, burst=3)
    assert row["ours"]["page faults"] == 10.0            # the counter's own step between two reads, no 500


def test_a_burst_of_one_gives_no_warm_table():
    row = {"name": "m", "ours": {}}
    rounds.interleaved_minima([(row, "ours", None, lambda: {"step": 1.0})], repeats=2, log=lambda s: None, warmup=0)
    assert "step warm" not in row["ours"]
    with pytest.raises(ValueError, match="burst must be an integer >= 1"):
        rounds.interleaved_minima([(row, "ours", None, lambda: {"step": 1.0})], repeats=1, log=lambda s: None, burst=0)


def test_ratio_is_ours_over_the_fastest_version_of_any_framework():
    rows = [{"name": "m", "ours": {"step": 3.0}, "theirs": {"torch: loop": {"step": 6.0}, "jax: lax.scan": {
        "step": 2.0}, "torch: compile: loop": {"step": 2.5}}},
            {"name": "no anchors", "ours": {"step": 1.0}}]
    bt.add_ratios(rows)
    assert rows[0]["fastest"] == "jax: lax.scan" and rows[0]["ratio"] == pytest.approx(1.5)
    assert "ratio" not in rows[1]


def test_without_the_frameworks_the_comparison_is_skipped_loudly(monkeypatch):
    monkeypatch.setattr(bt, "_anchor", lambda name: None)
    messages = []
    rows = bt.bench_train(repeats=1, quick=True, log=messages.append)
    assert any("torch is not installed" in m for m in messages) and any("jax is not installed" in m for m in messages)
    with pytest.raises(ValueError, match="anchors: unknown framework 'tf'"):
        bt.bench_train(repeats=1, quick=True, anchors=("tf",))
    names = [r["name"] for r in rows]
    assert names[:2] == ["selective copy mingru x2", "selective copy minlstm x2"] or \
        names[:2] == ["selective copy mingru x2 log", "selective copy minlstm x2 log"]
    for r in rows:
        assert "theirs" not in r and "ratio" not in r
        o = r["ours"]
        assert o["step"] > 0 and o["update"] > 0 and o["forward+backward"] > 0 and "cell" in o
        assert o["step"] >= o["update"]
    table = bt.format_train_table(rows)
    assert "ratio" not in table and all(n in table for n in names)


def test_the_project_step_trains_the_model():
    model = bt.models(quick=True)[0]
    before = model.loss_and_grads(model.params, model.batch, 0.0, None)[0]
    step = bt.project_step(model, lr=1e-2)
    for _ in range(5):
        parts = step()
    assert set(parts) == {"step", "forward+backward", "update"}
    assert step.state["opt"].step == 5
    after = model.loss_and_grads(step.state["params"], model.batch, 0.0, None)[0]
    assert after < before      # five AdamW steps on one batch lower its loss


def test_every_model_is_built_from_its_experiment():
    from minimal.experiments.minrnn import selective_copy as S
    from minimal.experiments.minrnn import shakespeare as Sh

    ms = {m.name: m for m in bt.models()}
    assert len(ms) == 13
    sc = next(m for m in ms.values() if m.family == "selective_copy")
    assert sc.meta["D"] == S.Job().D and sc.meta["T"] == S.Job().T and sc.meta["B"] == S.Job().batch
    lm = next(m for m in ms.values() if m.family == "shakespeare")
    assert (lm.meta["D"], lm.meta["T"], lm.meta["B"]) == (Sh.Config().D, Sh.Config().T, Sh.Config().batch)
    assert lm.dropout == Sh.Config().dropout
    assert [m.log_space for m in ms.values() if m.family == "shakespeare"] == [False, False, True, True, False]
    assert [m.log_space for m in ms.values() if m.family == "selective_copy"] == [False] * 4 + [True] * 4
    for m in ms.values():
        assert all(v.dtype == np.float32 for v in m.params.values())


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed: the torch twins are not checked")
def test_torch_twins_compute_our_models_in_float64():
    """The eager versions of all 13 models; the compiled ones (30-75 s of compiling each) on one model per kind in
    test_bench_torch_compile.py."""
    from minimal.bench import torch_models as tm

    for m in bt.models():
        assert tm.check_equal(bt.as_dtype(m, np.float64), compiled=False)["max_rel"] <= bt.EQUAL_TOL, m.name


def test_cli_prints_the_table(monkeypatch, capsys):
    from minimal.__main__ import main

    calls = []
    monkeypatch.setattr(bt, "bench_train", lambda **kw: calls.append(kw) or [
        {"name": "m", "ours": {"step": 2e-3, "forward+backward": 1.5e-3, "update": 5e-4}}])
    assert main(["bench", "train", "--quick", "--no-anchors"]) == 0
    assert calls[0]["quick"] and calls[0]["anchors"] == () and calls[0]["repeats"] == 3
    assert "m " in capsys.readouterr().out
    assert main(["bench", "train", "--quick", "--anchors", "jax"]) == 0
    assert calls[1]["anchors"] == ("jax",)
    assert main(["bench", "train", "--quick"]) == 0
    assert calls[2]["anchors"] == ("torch", "jax")
    assert main(["bench", "train", "--quick", "--no-anchors", "--burst", "3"]) == 0
    assert calls[3]["burst"] == 3 and calls[2]["burst"] == 1
    assert main(["bench", "train", "--backend", "cuda"]) == 2
    for argv, said in ((["bench", "train", "--anchors", "jax", "--no-anchors"], "contradict"),
                       (["bench", "train", "--burst", "0"], "--burst must be an integer >= 1"),
                       (["bench", "scan", "--burst", "2"], "--burst apply to bench train only"),
                       (["bench", "scan", "--pin", "0"], "--pin apply to bench train only"),
                       (["bench", "train", "--pin", "4096"], "--pin 4096: this process may run on cores")):
        assert main(argv) != 0
        assert said in capsys.readouterr().err


def test_the_table_names_the_fastest_version_and_the_checks():
    rows = bt.add_ratios([{"name": "copy", "ours": {"step": 3e-3, "step median": 3.5e-3, "forward+backward": 2e-3,
                                                     "update": 1e-3, "page faults": 0.0},
                           "checks": {"torch": {"max_rel": 1e-13, "equal": True},
                                      "jax": {"max_rel": 2e-12, "equal": True}},
                           "theirs": {"torch: loop": {"step": 9e-3}, "jax: lax.scan": {"step": 4e-3, "step median":
                                                                                         5e-3, "page faults": 7.0}}}])
    table = bt.format_train_table(rows)
    line = next(x for x in table.splitlines() if x.startswith("copy"))
    assert "jax: lax.scan" in line and "0.75" in line and "2.0e-12" in line and "4.00" in line and "5.00" in line
    assert "copy: torch: loop 9.00 ms, jax: lax.scan 4.00 ms" in table


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed: the torch twins are not checked")
def test_a_model_the_twin_does_not_know_is_reported_as_different():
    from minimal.bench import torch_models as tm

    m = bt.as_dtype(bt.models(quick=True)[0], np.float64)

    def loss_and_grads(p, batch, dropout, rng):   # our model grown by one param that the twin has never seen
        loss, grads = m.loss_and_grads({k: v for k, v in p.items() if k != "9.unknown"}, batch, dropout, rng)
        return loss, grads | {"9.unknown": np.ones(3)}

    extra = m._replace(params=m.params | {"9.unknown": np.ones(3)}, loss_and_grads=loss_and_grads)
    check = tm.check_equal(extra)
    assert check["max_rel"] == np.inf and "9.unknown" in check["why"]


def test_only_times_the_named_rows_and_an_unknown_name_is_refused_by_name(monkeypatch, capsys):
    from minimal.__main__ import main

    monkeypatch.setattr(bt, "_anchor", lambda name: None)
    rows = bt.bench_train(repeats=1, quick=True, only=["selective copy mingru x2"], cells=False, log=lambda s: None)
    assert [r["name"] for r in rows] == ["selective copy mingru x2"] and "cell" not in rows[0]["ours"]
    assert main(["bench", "train", "--quick", "--only", "no such row", "--no-anchors"]) == 2
    assert "only: no row named ['no such row']" in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed: the torch twins are not checked")
def test_torchs_matrix_product_rate_is_timed_on_the_steps_shapes():
    from minimal.bench import torch_models

    seconds = torch_models.matmul_seconds([(64, 32, 16, 1), (16, 8, 4, 3)], repeats=2)
    assert np.isfinite(seconds) and 0 < seconds < 1
