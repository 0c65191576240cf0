"""Character-level Shakespeare (Feng et al. Sec. 4.3): the task's windows, the language model's gradients, step
mode (RNN / KV cache) = the whole-sequence forward, generation, weights I/O, and a tiny run that learns."""
import dataclasses
import json

import numpy as np
import pytest

from minimal.experiments.minrnn import shakespeare as S, shakespeare_runs as SR, shakespeare_summary as SS
from minimal.gradcheck import rel_error
from minimal.tasks import char_lm
from minimal.data import data_path
from minimal.experiments.minrnn import shakespeare_model as SM
from minimal.run.stopping import ReduceOnPlateau


@pytest.fixture(scope="module")
def data():
    return char_lm.load()


# ---------------------------------------------------------------- the task

def test_load_matches_meta_and_round_trips(data):
    meta = json.loads(data_path("shakespeare", "meta.json").read_text())
    assert data.vocab == meta["vocab"] and len(data.vocab) == 70
    assert (data.train.size, data.test.size) == (1_003_854, 111_540)
    text = data_path("shakespeare", "test.txt").read_text()
    assert char_lm.decode(data.test[:500], data.vocab) == text[:500]
    assert data.train.max() < 70


def test_encode_names_an_unknown_character():
    with pytest.raises(ValueError, match="'z'"):
        char_lm.encode("abz", "ab")


def test_missing_file_names_the_prep_command(monkeypatch, tmp_path):
    monkeypatch.setattr(char_lm, "data_path", lambda *parts: tmp_path.joinpath(*parts))
    with pytest.raises(FileNotFoundError, match=r"meta\.json.*python data/shakespeare/prepare\.py"):
        char_lm.load()


def test_sample_batch_is_seeded_windows_of_the_text(data):
    w1 = char_lm.sample_batch(data.train, 5, 9, np.random.default_rng(3))
    w2 = char_lm.sample_batch(data.train, 5, 9, np.random.default_rng(3))
    assert w1.shape == (5, 10) and np.array_equal(w1, w2)
    for row in w1:   # each row is a contiguous slice of the training text
        starts = np.flatnonzero(data.train[:-9] == row[0])
        assert any(np.array_equal(data.train[s:s + 10], row) for s in starts)
    x, y = char_lm.split_xy(w1)
    assert np.array_equal(x[:, 1:], y[:, :-1])
    ids = np.arange(11)
    assert char_lm.sample_batch(ids, 50, 10, np.random.default_rng(0)).tolist() == [list(range(11))] * 50


def test_eval_windows_cover_every_target_once():
    ids = np.arange(23)
    w = char_lm.eval_windows(ids, 5)            # (23 - 1) // 5 = 4 windows
    assert w.shape == (4, 6)
    _, y = char_lm.split_xy(w)
    assert y.ravel().tolist() == list(range(1, 21))
    sub = char_lm.eval_windows(ids, 5, 2)       # evenly spaced: the first and the last
    assert sub[:, 0].tolist() == [0, 15]
    with pytest.raises(ValueError, match="n_windows"):
        char_lm.eval_windows(ids, 5, 5)


# ---------------------------------------------------------------- the model

@pytest.mark.parametrize("kind", SM.KINDS)
def test_lm_gradients_match_finite_differences(kind):
    rng = np.random.default_rng(1)
    params = SM.init_lm(rng, kind, 7, 4, 2, dtype="float64")
    params = {k: v + 0.1 * rng.standard_normal(v.shape) if v.ndim == 1 else v for k, v in params.items()}
    windows = rng.integers(0, 7, (2, 6))

    def loss(p):   # dropout with a seeded mask: the same masks on every call
        return SM.lm_loss_and_grads(p, windows, kind, dropout=0.2, rng=np.random.default_rng(5))

    _, grads = loss(params)
    eps = 1e-6
    for name, p in params.items():
        flat = [np.unravel_index(i, p.shape) for i in rng.choice(p.size, min(p.size, 3), replace=False)]
        num, ana = [], []
        for idx in flat:
            old = p[idx]
            p[idx] = old + eps
            lp = loss(params)[0]
            p[idx] = old - eps
            lm = loss(params)[0]
            p[idx] = old
            num.append((lp - lm) / (2 * eps))
            ana.append(grads[name][idx])
        assert rel_error(np.array(ana), np.array(num)) < 1e-6, name


@pytest.mark.parametrize("kind", SM.KINDS)
def test_step_mode_equals_the_whole_sequence_forward(kind):
    rng = np.random.default_rng(2)
    params = SM.init_lm(rng, kind, 11, 8, 3, dtype="float64")
    x = rng.integers(0, 11, (3, 9))
    z, _ = SM.lm_forward(params, x, kind)
    states, steps = None, []
    for t in range(x.shape[1]):
        zt, states = SM.step_logits(params, states, x[:, t], kind)
        steps.append(zt)
    assert rel_error(np.stack(steps, axis=1), z) < 1e-12


def test_rnn_state_is_constant_and_the_kv_cache_grows():
    rng = np.random.default_rng(3)
    prompt = np.array([1, 2])
    mem = {}
    for kind in SM.KINDS:
        params = SM.init_lm(rng, kind, 5, 8, 2)
        ids, mem[kind] = SM.generate(params, kind, prompt, 10, np.random.default_rng(0), return_memory=True)
        assert ids.shape == (10,) and ids.max() < 5
        assert np.array_equal(ids, SM.generate(params, kind, prompt, 10, np.random.default_rng(0)))
    for kind in ("mingru", "minlstm", "mingru_vanilla", "minlstm_vanilla"):
        assert np.all(mem[kind] == mem[kind][0])
    D, L = 8, 2                                                      # nanoGPT's attention width: D
    assert np.all(np.diff(mem["attention"]) == L * 2 * D * 4)      # one float32 key and value per block a step


def test_the_transformer_is_nanogpts_block():
    """Learned positions, N_HEADS-head causal attention at width D, no convolution (nanoGPT's GPT block)."""
    sp = SM.spec("attention", 11, 8, 2, T_max=16)
    assert sp[0].name == "token_position_embedding" and sp[0].init["T_max"] == 16
    assert sp[1].init["k"] is None and sp[1].init["expansion"] == 1 and sp[1].forward["n_heads"] == SM.N_HEADS
    params = SM.init_lm(np.random.default_rng(0), "attention", 11, 8, 2, T_max=16)
    assert params["0.P"].shape == (16, 8) and not any(".conv" in k for k in params)
    # the positions matter: the same tokens in another order are not a permutation of the logits
    x = np.array([[1, 2, 3, 1, 2, 3]])
    params["0.P"] = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    z, _ = SM.lm_forward(params, x, "attention")
    z2, _ = SM.lm_forward(params, x[:, ::-1].copy(), "attention")
    assert np.abs(z[0, -1] - z2[0, 2]).max() > 1e-3
    # step mode stops at the last learned position, with an error that says why
    states = None
    for t in range(16):
        _, states = SM.step_logits(params, states, np.array([1]), "attention")
    with pytest.raises(ValueError, match="T_max"):
        SM.step_logits(params, states, np.array([1]), "attention")


def test_log_space_and_vanilla_models_compute_different_functions():
    """The same params give other logits in log space (candidate g(k) > 0, App. B.3) than in vanilla form."""
    params = SM.init_lm(np.random.default_rng(4), "mingru", 11, 8, 2, dtype="float64")
    x = np.random.default_rng(5).integers(0, 11, (2, 9))
    z_log, _ = SM.lm_forward(params, x, "mingru")
    z_van, _ = SM.lm_forward(params, x, "mingru_vanilla")
    assert np.abs(z_log - z_van).max() > 1e-2
    assert SM.is_log_space("mingru") and not SM.is_log_space("mingru_vanilla") and not SM.is_log_space("attention")


def test_weights_round_trip_and_a_bad_file_is_named(tmp_path):
    c = S.Config(D=8, n_layers=2, kinds=("mingru",))
    p = {"mingru": SM.init_lm(np.random.default_rng(0), "mingru", 70, 8, 2)}
    path = tmp_path / "w.npz"
    S.save_weights(path, p, c)
    back = SR.load_weights(path, c)
    assert all(np.array_equal(back["mingru"][k], v) for k, v in p["mingru"].items())
    assert SR.load_weights(path).keys() == {"mingru"}   # the config from the sidecar
    S.save_weights(path, {"mingru": {k: v for k, v in p["mingru"].items() if k != "0.E"}}, c)
    with pytest.raises(ValueError, match="w.npz"):
        SR.load_weights(path, c)


def test_a_tiny_run_lowers_the_test_loss(tmp_path):
    c = S.Config(D=16, n_layers=1, T=16, batch=8, steps=40, lr=1e-2, warmup=5, eval_every=20, eval_windows=8,
                 kinds=("mingru", "attention"), sample_chars=20)
    m = S.run(c, out_dir=tmp_path, progress=False, save_weights_path=tmp_path / "w.npz")
    for kind, r in m["models"].items():
        assert r["curve_steps"] == [0, 20, 40]
        assert r["curve"][-1] < r["curve"][0] - 0.5, (kind, r["curve"])   # ln 70 = 4.25 at the start
        assert len(r["sample"]) == (20 if kind == "mingru" else 15)     # the Transformer: T - 1 positions left
    assert "ratio_to_transformer" in m["models"]["mingru"]
    # the flat metrics that reproduce's table puts beside PAPER
    assert {k for k in S.PAPER if not any(w in k for w in ("mamba", "minlstm", "vanilla"))} <= set(m)
    assert m["test_loss_mingru"] == m["models"]["mingru"]["best_test_loss"] == min(m["models"]["mingru"]["curve"])
    assert m["final_test_loss_mingru"] == m["models"]["mingru"]["final_test_loss"]
    assert m["steps_ratio_attention_to_mingru"] == (m["models"]["attention"]["steps_to_best"]
                                                    / m["models"]["mingru"]["steps_to_best"])
    assert set(SR.load_weights(tmp_path / "w.npz")) == {"mingru", "attention"}
    # an interrupted-and-resumed run: the checkpoints are complete, so a re-run resumes at the end
    again = S.run(c, out_dir=tmp_path, progress=False)
    assert again["models"]["mingru"]["resumed_from"] == 40
    assert again["models"]["mingru"]["curve"] == m["models"]["mingru"]["curve"]


def test_the_committed_fixed_runs_say_what_the_docstring_says():
    """The three seeds of the fixed-length Config (``shakespeare_fixed*.json``) give the numbers ``shakespeare_summary``'s
    docstring quotes."""
    runs = SR.seed_curves(name="fixed")
    assert sorted(runs) == [0, 1, 2]
    a = SS.across_seeds(runs)
    # saved before the stopping rule's fields existed: their Config is Config.fixed()
    assert all(S.Config.from_saved(r["config"]) == S.Config.fixed(seed=s) for s, r in runs.items())
    got = {k: (round(a[f"test_loss_{k}"], 3), round(a[f"test_loss_{k}_std"], 3))
           for k in ("mingru", "minlstm", "mingru_vanilla", "attention")}
    assert got == {"mingru": (1.644, 0.006), "minlstm": (1.646, 0.003), "mingru_vanilla": (1.637, 0.003),
                   "attention": (1.872, 0.001)}
    assert [(round(a[f"ratio_{k}_to_transformer"], 3), round(a[f"ratio_{k}_to_transformer_std"], 3))
            for k in ("mingru", "minlstm", "mingru_vanilla")] == [(0.878, 0.003), (0.880, 0.002), (0.874, 0.002)]
    assert (round(a["steps_ratio_attention_to_mingru"], 2), round(a["steps_ratio_attention_to_mingru_std"], 2)) == \
        (1.00, 0.01)
    for r in runs.values():
        for m in r["models"].values():
            assert 2300 <= m["steps_to_best"] <= 2400
            tail = [c for t, c in zip(m["curve_steps"], m["curve"]) if t >= 2200]
            assert max(tail) - min(tail) < 0.01


def test_the_committed_runs_until_the_best_stops_improving_say_what_the_docstring_says():
    """The three seeds of Config() (``shakespeare_full*.json``): every model stopped by the plateau rule after two
    cuts, and the numbers ``shakespeare_summary``'s docstring quotes."""
    runs = SR.seed_curves()
    assert sorted(runs) == [0, 1, 2]
    assert all(S.Config.from_saved(r["config"]) == S.Config(seed=s) for s, r in runs.items())
    a = SS.across_seeds(runs)
    kinds = ("mingru", "minlstm", "mingru_vanilla", "attention")
    got = {k: (round(a[f"test_loss_{k}"], 3), round(a[f"test_loss_{k}_std"], 3)) for k in kinds}
    assert got == {"mingru": (1.585, 0.004), "minlstm": (1.574, 0.011), "mingru_vanilla": (1.568, 0.014),
                   "attention": (1.658, 0.010)}
    assert [(round(a[f"ratio_{k}_to_transformer"], 3), round(a[f"ratio_{k}_to_transformer_std"], 3))
            for k in kinds[:3]] == [(0.956, 0.004), (0.950, 0.012), (0.946, 0.005)]
    assert (round(a["steps_ratio_attention_to_mingru"], 2), round(a["steps_ratio_attention_to_mingru_std"], 2)) == \
        (1.31, 0.14)
    for r in runs.values():
        for kind, m in r["models"].items():
            assert m["stopped_early"] and len(m["lr_cut_steps"]) == 2 and m["steps_run"] < S.Config().steps
            # the rule replayed on the saved curve cuts and stops where the run did
            rule = ReduceOnPlateau.replay(dict(zip(m["curve_steps"], m["curve"])), lr=3e-3, patience=500,
                                            min_gain=0.005, warmup=100)
            assert rule.done and rule.starts == m["lr_cut_steps"] and rule.best_step == m["steps_to_best"]
            assert m["curve_steps"][-1] == m["steps_run"]
            assert len(m["train_curve"]) == 50


def test_the_committed_config_is_loaded_not_trained(tmp_path, monkeypatch):
    """run(Config()) loads the committed seed-0 run (as a sweep loads its grid), so `reproduce minrnn --quick`
    reports it; another seed, another Config or a request for new weights trains."""
    from minimal.reproduce.work import reproduce

    assert S.finished(S.Config())
    assert not S.finished(S.Config(seed=1)) and not S.finished(S.Config(lr=1e-3))
    assert not S.finished(S.Config(kinds=("mingru",)))

    def no_training(*a, **k):
        raise AssertionError("trained")

    monkeypatch.setattr(S, "train", no_training)
    got = S.run(S.Config(), out_dir=tmp_path / "run", progress=False)
    saved = S.load_curves()
    assert got["models"] == saved["models"] and got["test_loss_mingru"] == saved["test_loss_mingru"]
    assert not (tmp_path / "run").exists()         # the metrics are returned; reproduce writes them, into results.json
    with pytest.raises(AssertionError, match="trained"):
        S.run(S.Config(seed=1), progress=False)
    res = reproduce("minrnn", quick=True, only=["shakespeare"], out_dir=tmp_path / "page", progress=False)
    assert res["shakespeare"]["mode"] == "full, all runs on disk"
    assert res["shakespeare"]["metrics"]["ratio_mingru_to_transformer"] == saved["ratio_mingru_to_transformer"]


def test_step_cpu_times_are_the_docstrings():
    t = json.loads(SR.STEP_CPU.read_text())
    assert {k: round(v, 2) for k, v in t["config_size"].items()} == {"mingru": 0.09, "minlstm": 0.09,
                                                                     "attention": 0.06, "mingru_vanilla": 0.06}
    assert {k: round(v, 1) for k, v in t["paper"].items()} == {"mingru": 11.1, "minlstm": 14.7, "attention": 8.6,
                                                               "mingru_vanilla": 9.7}
    assert round(sum(t["paper_cpu_hours_5000_steps"][k] for k in ("mingru", "minlstm", "attention"))) == 48
