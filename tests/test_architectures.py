"""Architecture comparison (Zucchet et al. Fig. 4-5): the composed models' backward passes, the tasks' losses,
the sweep's grid and summary, and the hidden-size sweep (Fig. 3)."""
import dataclasses
import functools
import json

import numpy as np
import pytest

from minimal.cells import gru, lstm
from minimal.experiments.zucchet import architectures as A
from minimal.experiments.zucchet import hidden_size as HS
from minimal.gradcheck import TOLERANCE, check_function
from minimal.experiments.zucchet import stacks


def _check_model(arch, layers, T, seed=0):
    rng = np.random.default_rng(seed)
    params = stacks.init_model(rng, arch, d_in=3, d_out=2, hidden=3, layers=layers, readout_scale=1.0)
    x = rng.standard_normal((2, T, 3))
    errors = check_function(functools.partial(stacks.model_forward, arch=arch),
                            functools.partial(stacks.model_backward, arch=arch), params, x)
    return params, errors


@pytest.mark.parametrize("arch", stacks.ARCHS)
@pytest.mark.parametrize("layers,T", [(1, 1), (2, 3)])
def test_stacked_model_backward_matches_finite_differences(arch, layers, T):
    params, errors = _check_model(arch, layers, T)
    assert set(errors) == set(params) | {"x"}
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("arch", stacks.ARCHS)
@pytest.mark.parametrize("layers", [1, 2])
def test_readout_last_is_the_last_step_of_the_whole_output_gradients_included(arch, layers):
    rng = np.random.default_rng(3)
    params = stacks.init_model(rng, arch, d_in=3, d_out=2, hidden=3, layers=layers, readout_scale=1.0)
    x = rng.standard_normal((2, 5, 3))
    y_all, c_all = stacks.model_forward(params, x, arch)
    y_last, c_last = stacks.model_forward(params, x, arch, readout="last")
    assert y_last.shape == (2, 1, 2)
    np.testing.assert_allclose(y_last, y_all[:, -1:], rtol=1e-12, atol=1e-14)
    dy_last = rng.standard_normal(y_last.shape)
    dy_all = np.zeros_like(y_all)
    dy_all[:, -1:] = dy_last
    dx_all, g_all = stacks.model_backward(params, c_all, dy_all, arch)
    dx, g = stacks.model_backward(params, c_last, dy_last, arch)
    np.testing.assert_allclose(dx, dx_all, rtol=1e-11, atol=1e-13)
    for k in g:
        np.testing.assert_allclose(g[k], g_all[k], rtol=1e-11, atol=1e-13, err_msg=k)


def test_one_layer_lstm_model_is_an_embedding_the_cell_then_a_linear_readout():
    # Sec. 3.3: "a linear embedding layer projects the input to a latent representation, we then repeat the
    # recurrent layer once or twice, and finally apply a linear readout"
    rng = np.random.default_rng(1)
    params = stacks.init_model(rng, "lstm", d_in=3, d_out=2, hidden=4, layers=1)
    x = rng.standard_normal((2, 5, 3))
    e = x @ params["embed/W"] + params["embed/b"]
    h, _ = lstm.forward({k[3:]: v for k, v in params.items() if k.startswith("l0/")}, e)
    y, _ = stacks.model_forward(params, x, "lstm")
    np.testing.assert_allclose(y, h @ params["readout/W"] + params["readout/b"], rtol=1e-12, atol=1e-14)


def test_every_lru_variant_has_one_width_so_the_comparison_is_fair():
    # Sec. 3.3: the LRU's input/output dimension and its number of neurons all set to one value (hidden)
    rng = np.random.default_rng(2)
    for arch in ("lru_out", "lru_in_out", "lru_in_skip"):
        p = stacks.init_model(rng, arch, d_in=7, d_out=6, hidden=8, layers=1)
        assert p["embed/W"].shape == (7, 8) and p["readout/W"].shape == (8, 6)
        assert p["l0/B_re"].shape == (8, 8) and p["l0/C_re"].shape == (8, 8) and p["l0/W_out_m"].shape == (8, 8)
    counts = {a: stacks.n_params(stacks.init_model(rng, a, 7, 6, 32, 1)) for a in ("lru_out", "lru_in_out", "lru_in_skip")}
    # the input gate adds two H x H matrices; in_skip's sigmoid branch reads the (embedded) input, also H wide
    assert counts["lru_in_out"] - counts["lru_out"] == 2 * 32 * 32 == counts["lru_in_skip"] - counts["lru_out"]


def test_parameter_counts_add_up_from_the_cells():
    rng = np.random.default_rng(0)
    embed = 5 * 8 + 8
    p = stacks.init_model(rng, "gru", d_in=5, d_out=4, hidden=8, layers=2)
    assert stacks.n_params(p) == embed + 2 * gru.n_params(8, 8) + 8 * 4 + 4
    p = stacks.init_model(rng, "lstm", d_in=5, d_out=4, hidden=8, layers=1)
    assert stacks.n_params(p) == embed + lstm.n_params(8, 8) + 8 * 4 + 4
    # the construction's class: W_in_m, W_in_x (H, d_in), ν (H), W_out_m, W_out_x (H, H), D (d_out, H)
    p = stacks.init_model(rng, "gated_diagonal", d_in=5, d_out=4, hidden=8, layers=1)
    assert stacks.n_params(p) == 2 * 8 * 5 + 8 + 2 * 8 * 8 + 4 * 8
    p = stacks.init_model(rng, "gated_dense", d_in=5, d_out=4, hidden=8, layers=1)
    assert stacks.n_params(p) == 2 * 8 * 5 + 8 * 8 + 2 * 8 * 8 + 4 * 8


def test_init_model_dtype_and_readout_scale():
    p1 = stacks.init_model(np.random.default_rng(3), "gated_diagonal", 5, 4, 8, readout_scale=1.0)
    p2 = stacks.init_model(np.random.default_rng(3), "gated_diagonal", 5, 4, 8, readout_scale=0.1, dtype="float32")
    assert all(v.dtype == np.float32 for v in p2.values())
    np.testing.assert_allclose(p2["l0/D"], 0.1 * p1["l0/D"], rtol=1e-6)
    np.testing.assert_allclose(p2["l0/W_in_m"], p1["l0/W_in_m"], rtol=1e-6)


def test_icl_loss_scores_only_the_query_token():
    job = A.Job(task="icl", n_eval=16)
    d_in, d_out, sample, loss, evalsets = A.task_spec(job)
    assert (d_in, d_out) == (7, 3)
    x, y_q = sample(np.random.default_rng(0), 4, np.float64)
    y = np.random.default_rng(1).standard_normal((4, x.shape[1], 3))
    L, dy = loss(y, y_q)
    assert np.all(dy[:, :-1] == 0.0)
    np.testing.assert_allclose(L, 0.5 * np.mean((y[:, -1] - y_q) ** 2), rtol=1e-14)


def test_teacher_task_targets_come_from_the_lsa_teacher():
    job = A.Job(task="teacher", d=4, T_teacher=5, n_eval=40)
    d_in, d_out, sample, loss, evalsets = A.task_spec(job)
    x, y_star, var = evalsets["val"]
    assert (d_in, d_out) == (5, 4)
    assert x.shape == (4, 5, 5) and y_star.shape == (4, 5, 4)
    np.testing.assert_array_equal(x[..., -1], 1.0)
    assert var == np.var(y_star) and set(evalsets) == {"val"}
    assert A.Job().d == 6 and A.Config().d == 6   # Sec. 3.3: Fig. 4 uses d = 6


def test_icl_validation_draws_w_star_with_twice_the_training_variance():
    # App. C.1: training W*_ij ~ N(0, 1/3), validation N(0, 2/3); one GD step's loss scales with σ_w²
    evalsets = A.task_spec(A.Job(task="icl", n_eval=20480))[4]
    assert A.SIGMA_W2_OOD == 2.0 / 3.0
    np.testing.assert_allclose(evalsets["ood"][2] / evalsets["val"][2], 2.0, rtol=0.05)
    np.testing.assert_allclose(np.var(evalsets["ood"][1]) / np.var(evalsets["val"][1]), 2.0, rtol=0.05)


def test_training_lowers_the_teacher_loss():
    job = A.Job(task="teacher", arch="gated_diagonal", hidden=8, steps=60, lr=1e-2, warmup_steps=5, n_eval=256)
    r = A.run_job(job)
    assert r["diverged"] == 0
    assert r["curve"][-1] < 0.7 * r["curve"][0], r["curve"]
    assert 0.0 < r["rel_loss"] < 1.0 and r["n_params"] > 0


def test_jobs_cover_the_grid():
    config = A.Config(tasks=("icl",), archs=("lstm", "gru"), hiddens=(4, 8, 16), layers=(1, 2), seeds=(0,))
    js = A.jobs(config)
    assert len(js) == 2 * 3 * 2
    assert {(j.arch, j.hidden, j.layers) for j in js} == {(a, h, l) for a in ("lstm", "gru") for h in (4, 8, 16)
                                                         for l in (1, 2)}
    assert all(j.lr == config.lr_icl and j.steps == config.steps_icl for j in js)
    with pytest.raises(ValueError, match="archs"):
        A.jobs(A.Config(archs=("transformer",)))
    with pytest.raises(ValueError, match="tasks"):
        A.jobs(A.Config(tasks=("copy",)))


def _record(task, arch, rel, hidden=8):
    return {"config": {"task": task, "arch": arch, "hidden": hidden, "layers": 1},
            "result": {"val_loss": rel, "rel_loss": rel, "baseline": 1.0, "n_params": 10 * hidden, "diverged": 0,
                       "ms_per_step": 1.0, **({"ood_rel_loss": rel} if task == "icl" else {})}}


def test_summary_reads_the_papers_orderings_from_the_numbers():
    good = [_record("teacher", "gated_diagonal", 1e-4), _record("teacher", "lstm", 0.3),
            _record("teacher", "gru", 0.2), _record("teacher", "lru_out", 0.5), _record("teacher", "lru_in_out", 0.1),
            _record("icl", "gru", 0.9), _record("icl", "gated_diagonal", 1.01)]
    s = A.summarise(good)
    assert {k: s[k] for k in A.PAPER} == A.PAPER
    bad = [_record("teacher", "gated_diagonal", 0.5), _record("teacher", "lstm", 0.3),
           _record("teacher", "lru_out", 0.05), _record("teacher", "lru_in_skip", 0.1), _record("icl", "lstm", 1.2)]
    s = A.summarise(bad)
    assert all(s[k] == 0 for k in A.PAPER)
    assert s["teacher_best_rel_loss_lstm"] == 0.3


def test_run_writes_a_resumable_sweep_and_returns_its_summary(tmp_path):
    config = A.Config(tasks=("teacher",), archs=("gated_diagonal", "gru"), hiddens=(4,), layers=(1,), seeds=(0,),
                      steps_teacher=5, n_eval=40, processes=False, sweep_dir=str(tmp_path / "sweep"))
    assert not A.finished(config)
    r = A.run(config, out_dir=tmp_path / "out", progress=False)
    assert A.finished(config) and not A.finished(dataclasses.replace(config, hiddens=(4, 8)))
    files = sorted((tmp_path / "sweep").glob("arch-*.json"))
    assert len(files) == 2 and r["n_jobs"] == 2
    assert not (tmp_path / "out").exists()      # the summary is returned; reproduce writes it, into results.json
    mtimes = [f.stat().st_mtime_ns for f in files]
    again = A.run(config, progress=False)
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    assert again["rows"] == r["rows"]
    assert [p.name for p in A.plot(r, tmp_path / "fig")] == ["architectures.png", "architectures_train_val.png"]


def test_bad_model_arguments_name_themselves():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="arch"):
        stacks.init_model(rng, "transformer", 3, 2, 4)
    with pytest.raises(ValueError, match="hidden"):
        stacks.init_model(rng, "lstm", 3, 2, 0)
    with pytest.raises(ValueError, match="layers"):
        stacks.init_model(rng, "lstm", 3, 2, 4, layers=0)
    with pytest.raises(ValueError, match="task"):
        A.task_spec(A.Job(task="copy"))


# ---------------------------------------------------------------- Fig. 3: hidden size

def test_construction_neuron_counts():
    assert HS.construction_neurons(4) == 14      # d(d+1)/2 + d, Sec. 3 (10 KV + 4 Q, Table 1)
    assert HS.construction_neurons(6) == 27      # Fig. 3A
    assert HS.gd_neurons(3, 3) == 12
    with pytest.raises(ValueError, match="d"):
        HS.construction_neurons(0)


def test_hidden_size_jobs_are_one_layer_gated_rnns_with_d6():
    js = HS.jobs(HS.Config.quick())
    assert len(js) == 6
    assert all(j.arch == "gated_diagonal" and j.layers == 1 for j in js)
    assert {j.d for j in js if j.task == "teacher"} == {6}
    with pytest.raises(ValueError, match="hiddens"):
        HS.jobs(HS.Config(hiddens_teacher=(0,)))


def test_hidden_size_summary_finds_the_smallest_size_reaching_the_threshold():
    def rec(task, h, rel):
        return {"config": {"task": task, "hidden": h}, "result": {"rel_loss": rel}}
    config = HS.Config(identify_tol=1e-3, icl_tol=0.02)
    records = [rec("teacher", 27, 0.1), rec("teacher", 54, 1e-4), rec("teacher", 81, 1e-5),
               rec("icl", 4, 1.5), rec("icl", 8, 1.01), rec("icl", 8, 1.02), rec("icl", 16, 1.0)]
    s = HS.summarise(records, config)
    assert s["teacher_needed"] == 54 and s["teacher_needed_over_construction"] == 2.0
    assert s["icl_rel_loss"][1] == pytest.approx(1.015)
    assert s["icl_needed"] == 8 and s["icl_needed_below_construction"] == 1
    s = HS.summarise([rec("teacher", 8, 0.5), rec("icl", 64, 2.0)], config)
    assert np.isnan(s["teacher_needed"]) and s["icl_needed_below_construction"] == 0


def test_hidden_size_run_and_plot(tmp_path):
    config = HS.Config(hiddens_teacher=(4,), hiddens_icl=(2,), seeds=(0,), steps_teacher=3, steps_icl=3,
                       n_eval=64, processes=False, sweep_dir=str(tmp_path))
    assert not HS.finished(config)
    r = HS.run(config, progress=False)
    assert r["n_jobs"] == 2 and len(list(tmp_path.glob("hidden-*.json"))) == 2
    assert HS.finished(config) and not HS.finished(dataclasses.replace(config, seeds=(0, 1)))
    assert [p.name for p in HS.plot(r, tmp_path / "fig")] == ["hidden_size.png"]


def test_train_job_from_run_jobs_initialisation_is_run_job():
    job = A.Job(task="icl", arch="gated_diagonal", hidden=4, layers=2, steps=6, n_eval=64)
    d_in, d_out = A.task_spec(job)[:2]
    params = stacks.init_model(np.random.default_rng(job.seed), job.arch, d_in, d_out, job.hidden, job.layers,
                          job.readout_scale, job.dtype)
    a, b = A.run_job(job), A.train_job(job, params)
    assert a["val_loss"] == b["val_loss"] and a["curve"] == b["curve"]
    params["l0/D"] = params["l0/D"] * 0.01      # another start, another result
    assert A.train_job(job, params)["val_loss"] != a["val_loss"]
