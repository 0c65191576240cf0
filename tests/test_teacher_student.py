"""The teacher-student task and experiment of Zucchet et al. Sec. 4.1: the task's targets are linear
self-attention, a short run learns, and run()
returns every metric the paper's Table 1 has."""
import dataclasses
import json

import numpy as np
import pytest

from minimal.run import io
from minimal.constructions import lsa_as_gated_rnn
from minimal.cells import gated_rnn, lsa
from minimal.experiments.zucchet import teacher_student as ts
from minimal.tasks import lsa_teacher


def test_targets_are_causal_linear_self_attention(rng):
    teacher = lsa_teacher.make_teacher(rng, 4)
    x = lsa_teacher.sample_inputs(rng, 3, 5, 4)
    y = lsa_teacher.targets(teacher, x)
    y_rec = lsa.forward(teacher.params(), x, mode="sequential")[0]
    np.testing.assert_allclose(y, y_rec, atol=1e-12)
    # y_t = Σ_{t'<=t} v_t' (k_t' . q_t), written out for t = 3 (0-based 2)
    v, k, q = x @ teacher.W_V.T, x @ teacher.W_K.T, x @ teacher.W_Q.T
    np.testing.assert_allclose(y[:, 2], np.einsum("bsv,bs->bv", v[:, :3], np.einsum("bsk,bk->bs", k[:, :3],
                                                                                     q[:, 2])), atol=1e-12)


def test_construction_solves_the_task_exactly(rng):
    """The Fig. 1 construction reaches loss 0: the task is realisable by the student architecture."""
    teacher = lsa_teacher.make_teacher(rng, 4)
    x_tilde, y_star = lsa_teacher.sample_batch(rng, teacher, 4, 32)
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    y = gated_rnn.forward(c.params, x_tilde, lam=c.lam)[0]
    assert lsa_teacher.relative_loss(y, y_star) < 1e-24
    assert lsa_teacher.relative_loss(np.zeros_like(y_star), y_star) > 0.99


def test_sample_batch_shapes_dtype_and_appended_one(rng):
    teacher = lsa_teacher.make_teacher(rng, 4)
    x_tilde, y_star = lsa_teacher.sample_batch(rng, teacher, 2, 7, dtype=np.float32)
    assert x_tilde.shape == (2, 7, 5) and y_star.shape == (2, 7, 4)
    assert x_tilde.dtype == np.float32 and y_star.dtype == np.float32
    assert np.all(x_tilde[..., -1] == 1.0)


def test_mse_gradient(rng):
    y, y_star = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    loss, dy = lsa_teacher.mse(y, y_star)
    assert loss == pytest.approx(np.mean((y - y_star) ** 2))
    eps = 1e-6
    y2 = y.copy()
    y2[1, 2, 3] += eps
    assert (lsa_teacher.mse(y2, y_star)[0] - loss) / eps == pytest.approx(dy[1, 2, 3], rel=1e-4)


def test_task_bad_inputs(rng):
    teacher = lsa_teacher.make_teacher(rng, 4)
    with pytest.raises(ValueError, match="d must be an integer"):
        lsa_teacher.make_teacher(rng, 0)
    with pytest.raises(ValueError, match="T must be an integer"):
        lsa_teacher.sample_inputs(rng, 2, 0, 4)
    with pytest.raises(ValueError, match="x must have shape"):
        lsa_teacher.targets(teacher, np.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match="teacher must be a Teacher"):
        lsa_teacher.targets(teacher.params(), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="y_star must have shape"):
        lsa_teacher.mse(np.zeros((2, 3, 4)), np.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match="x must have shape"):
        lsa_teacher.append_one(np.zeros((2, 3)))


# --- the experiment --------------------------------------------------------------------------------------
def test_eval_set_is_fixed_and_matches_the_teacher():
    cfg = ts.Config(eval_batch=4)
    x1, y1 = ts.eval_set(cfg)
    x2, y2 = ts.eval_set(cfg)
    np.testing.assert_array_equal(x1, x2)
    teacher = lsa_teacher.make_teacher(np.random.default_rng(cfg.seed), cfg.d)
    np.testing.assert_allclose(y1, lsa_teacher.targets(teacher, x1))


def test_tiny_run_learns_and_reports_every_paper_metric(tmp_path):
    cfg = ts.Config(hidden=12, gates=12, T=6, batch=16, steps=150, warmup=10, eval_batch=32)
    res = ts.run(cfg, out_dir=tmp_path, progress=False, save_weights_path=tmp_path / "w.npz")
    assert set(ts.PAPER) <= set(res)
    json.dumps(res)  # JSON-serialisable
    assert res["relative_loss"] < 0.5       # from ~1 at the start (readout scaled by 0.1)
    assert 0 <= res["hidden_removed"] <= 12 and 0 <= res["gates_removed"] <= 12
    teacher, params, losses, sps = ts.load_weights(tmp_path / "w.npz")
    assert losses.shape == (150,) and losses[-1] < losses[0]
    assert params["nu"].shape == (12,) and sps > 0
    paths = ts.plot(res, tmp_path)
    assert len(paths) == 2 and all(p.endswith(".png") for p in paths)


def test_run_checkpoints_in_out_dir_and_resumes_there(tmp_path):
    cfg = ts.Config(hidden=6, gates=6, T=5, batch=8, steps=40, warmup=5, eval_batch=16)
    ts.run(cfg, out_dir=tmp_path, progress=False, save_weights_path=tmp_path / "a.npz")
    assert len(list(tmp_path.glob("teacher_student_*.ckpt.npz"))) == 1
    ts.run(cfg, out_dir=tmp_path, progress=False, save_weights_path=tmp_path / "b.npz")  # resumes at step 40
    a, b = ts.load_weights(tmp_path / "a.npz"), ts.load_weights(tmp_path / "b.npz")
    for k in a[1]:
        np.testing.assert_array_equal(a[1][k], b[1][k])
    np.testing.assert_array_equal(a[2], b[2])
    assert np.isnan(b[3])          # the resumed run trained no step: no time per step was measured
    res = ts.run(cfg, out_dir=tmp_path, progress=False)
    assert np.isnan(res["ms_per_step"])


def test_weights_are_written_atomically_and_checked_on_load(tmp_path, monkeypatch):
    cfg = ts.Config(hidden=6, gates=6, T=5, batch=8, steps=10, warmup=2, eval_batch=16)
    path = tmp_path / "w.npz"
    ts.run(cfg, progress=False, save_weights_path=path)
    before = path.read_bytes()

    def failing_savez(f, **arrays):
        f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(ts.np, "savez", failing_savez)
    teacher, params, losses, sps = ts.load_weights(path)
    with pytest.raises(OSError, match="disk full"):
        ts.save_weights(path, cfg, teacher, params, losses, sps)
    monkeypatch.undo()
    assert path.read_bytes() == before                      # the old file is whole
    io.save_weights(tmp_path / "partial.npz", {"student": {"nu": params["nu"]}, "teacher": {"W_V": teacher.W_V}}, cfg)
    with pytest.raises(ValueError, match="partial.npz is not a complete teacher-student weights file"):
        ts.load_weights(tmp_path / "partial.npz")


def test_scores_are_on_pruned_neurons_and_pruning_is_reported_per_threshold(tmp_path):
    cfg = ts.Config(hidden=12, gates=12, T=6, batch=16, steps=150, warmup=10, eval_batch=32)
    res = ts.run(cfg, out_dir=tmp_path, progress=False)
    assert set(res["pruning_by_tol"]) == {f"{t:g}" for t in ts.PRUNE_TOLS} and res["prune_tol"] == cfg.prune_tol
    at = res["pruning_by_tol"][f"{cfg.prune_tol:g}"]
    assert (at["hidden_removed"], at["gates_removed"]) == (res["hidden_removed"], res["gates_removed"])
    removed = [res["pruning_by_tol"][f"{t:g}"]["hidden_removed"] for t in sorted(ts.PRUNE_TOLS)]
    assert removed == sorted(removed)           # a higher threshold removes at least as many neurons
    assert {"kv_score_all", "q_score_all"} <= set(res)


def test_paper_optimiser_is_app_b1():
    p = ts.Config.paper_optimiser()
    assert (p.lr, p.final_lr, p.weight_decay, p.decay_until, p.warmup) == (1e-3, 1e-6, 1e-4, 1.0, 0)


def test_configs_are_paper_sized():
    full, quick = ts.Config(), ts.Config.quick()
    assert (full.d, full.T, full.hidden, full.gates) == (4, 32, 100, 100)
    assert dataclasses.replace(quick, steps=full.steps, weight_decay=full.weight_decay,
                               decay_until=full.decay_until, eval_batch=full.eval_batch) == full
    assert quick.steps < full.steps
