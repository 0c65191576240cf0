"""The minRNN experiments (Feng et al., "Were RNNs All We Needed?"): parameter counts (Sec. 3.1.3, 3.2.4) and
the training-step runtime / memory comparison (Sec. 4.1, Fig. 1).

- Counts from the cells' ``init`` equal the closed forms 2 H D, 3 H (D + H), 3 H D, 4 H (D + H) (+ one H-bias
  per gate), and the weight ratios round to the paper's 33 / 22 / 17 / 13 % and 38 / 25 / 19 / 15 %.
- The runtime experiment returns every key with positive times at a tiny T (no timing is asserted), and its
  cache sizes follow the per-position float counts in its docstring.
"""
import json

import numpy as np
import pytest

from minimal.cells import gru, lstm, mingru, minlstm
from minimal.experiments import experiments
from minimal.experiments.minrnn import param_counts as P
from minimal.experiments.minrnn import runtime as R

CELLS = {"mingru": mingru, "gru": gru, "minlstm": minlstm, "lstm": lstm}


def test_registered_under_minrnn():
    assert {"param_counts", "runtime"} <= set(experiments("minrnn"))


@pytest.mark.parametrize("d_x", [1, 7, 64])
@pytest.mark.parametrize("alpha", [1, 2, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_counts_equal_the_closed_forms(d_x, alpha, bias):
    d_h = alpha * d_x
    for name, mod in CELLS.items():
        n = P.count(mod.init(np.random.default_rng(0), d_x, d_h, bias=bias))
        assert n == P.closed_form(name, d_x, d_h, bias) == mod.n_params(d_x, d_h, bias=bias)


def test_percentages_round_to_the_papers():
    m = P.run(P.Config.quick(), progress=False)
    assert set(P.PAPER) <= set(m)
    for key, paper in P.PAPER.items():
        assert round(m[key]) == paper, key
    # exact ratios: 2 / (3 (1 + α)) and 3 / (4 (1 + α))
    for a in (1, 2, 3, 4):
        assert m[f"mingru_pct_alpha{a}"] == pytest.approx(100 * 2 / (3 * (1 + a)), rel=1e-12)
        assert m[f"minlstm_pct_alpha{a}"] == pytest.approx(100 * 3 / (4 * (1 + a)), rel=1e-12)
        # biases move the ratio by less than a point
        assert abs(m[f"mingru_pct_bias_alpha{a}"] - m[f"mingru_pct_alpha{a}"]) < 1
        assert abs(m[f"minlstm_pct_bias_alpha{a}"] - m[f"minlstm_pct_alpha{a}"]) < 1


def test_param_counts_table_and_plot(tmp_path):
    m = P.run(P.Config(), out_dir=tmp_path, progress=False)
    assert "| 1 | 24,576 | 8,192 | 33.3 % | 33 % |" in P.table(m)
    assert list(tmp_path.iterdir()) == []          # the metrics are returned; reproduce writes them, into results.json
    assert all(p.exists() for p in P.plot(m, tmp_path))


def test_runtime_tiny_run_returns_every_key(tmp_path):
    cfg = R.Config(T_values=(3, 8), batch=4, d_in=3, d_hidden=5, repeats=1)
    m = R.run(cfg, out_dir=tmp_path, progress=False)
    assert m["T"] == [3, 8]
    assert set(m["times_ms"]) == set(m["cache_bytes"]) == set(R.MODELS)
    for name in R.MODELS:
        assert len(m["times_ms"][name]) == 2 and all(t > 0 for t in m["times_ms"][name])
        assert m[f"ms_{name}_T8"] > 0
    for name in R.BASELINE:
        assert all(s > 0 for s in m["speedup"][name])
        for T in (3, 8):
            assert m[f"speedup_{name}_T{T}"] > 0
    assert {"mem_ratio_mingru_gru", "mem_ratio_minlstm_lstm"} <= set(m)
    assert list(tmp_path.iterdir()) == []          # the metrics are returned; reproduce writes them, into results.json
    assert all(p.exists() for p in R.plot(m, tmp_path))


def test_runtime_cache_sizes_follow_the_float_counts():
    """Per (B, T) position: GRU D + 5H, minGRU D + 4H (log D + 6H), LSTM D + 7H, minLSTM D + 6H (log D + 7H),
    plus the (B, H) initial states GRU and LSTM keep."""
    B, T, D, H = 2, 5, 3, 4
    cfg = R.Config(T_values=(T,), batch=B, d_in=D, d_hidden=H, repeats=1)
    m = R.run(cfg, progress=False)
    per_pos = {"gru": D + 5 * H, "mingru": D + 4 * H, "mingru_log": D + 6 * H,
               "lstm": D + 7 * H, "minlstm": D + 6 * H, "minlstm_log": D + 7 * H}
    states = {"gru": 1, "lstm": 2}
    for name, n in per_pos.items():
        assert m["cache_bytes"][name] == [4 * (B * T * n + states.get(name, 0) * B * H)], name


def test_runtime_rejects_unknown_models():
    with pytest.raises(ValueError, match="models"):
        R.run(R.Config(models=("gru", "transformer")), progress=False)
