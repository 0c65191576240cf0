"""The peak memory of a training step (``minimal.experiments.minrnn.peak_memory``): the measurement sees a known
allocation, a step's peak holds at least its cache, and the committed full run is the one the lesson reads."""
import sys

import numpy as np
import pytest

from minimal.data import data_path, load_json
from minimal.experiments.minrnn import peak_memory as PM, runtime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measures through /proc (Linux)")


KNOWN = r"""
import numpy as np
from minimal.experiments.minrnn import peak_memory as PM
from minimal.run import speed
assert speed.tune_malloc(mmap_threshold=64 << 10, trim_threshold=0)   # as PM._measure sets up its process
n = 64 << 20

def step():
    a = np.ones(n, dtype=np.uint8)
    del a
print(PM.peak_step_bytes(step), PM.peak_step_bytes(lambda: None))
"""


def test_the_peak_of_a_known_allocation_is_its_size():
    # in a fresh process, as run() measures: this one's malloc may keep freed memory that a step would reuse
    import subprocess
    out = subprocess.run([sys.executable, "-c", KNOWN], capture_output=True, text=True, check=True).stdout.split()
    peak, idle = int(out[0]), int(out[1])
    assert abs(peak - (64 << 20)) < (1 << 20), peak    # the kernel's RSS counters are batched: a slack of pages
    assert idle < (1 << 20), idle


def test_a_steps_peak_holds_at_least_its_cache_and_grows_with_T():
    m = PM.run(PM.Config(T_values=(32, 256), models=("gru", "mingru", "mingru_log")), progress=False)
    for name in ("gru", "mingru", "mingru_log"):
        assert all(p >= c for p, c in zip(m["peak_bytes"][name], m["cache_bytes"][name])), name
        assert m["peak_bytes"][name][1] > 4 * m["peak_bytes"][name][0], name
    assert m["peak_ratio_mingru_gru"] == m["peak_bytes"]["mingru"][-1] / m["peak_bytes"]["gru"][-1]
    assert m["cache_ratio_mingru_log_gru"] == m["cache_bytes"]["mingru_log"][-1] / m["cache_bytes"]["gru"][-1]


def test_the_committed_run_is_the_full_config_with_every_ratio():
    m = load_json(data_path("minrnn", "peak_memory_full.json", must_exist=True))
    c = PM.Config()
    assert m["T"] == list(c.T_values) and set(m["peak_bytes"]) == set(runtime.MODELS)
    assert m["config"]["batch"] == c.batch == 64
    for name, base in runtime.BASELINE.items():
        assert m[f"peak_ratio_{name}_{base}"] == m["peak_bytes"][name][-1] / m["peak_bytes"][base][-1]
        assert m[f"cache_ratio_{name}_{base}"] == m["cache_bytes"][name][-1] / m["cache_bytes"][base][-1]
    D = H = 32                        # runtime's cache per (b, t) position, in floats (lesson minrnn_b, section 3)
    per_position = {"gru": D + 5 * H, "mingru": D + 4 * H, "mingru_log": D + 6 * H,
                    "lstm": D + 7 * H, "minlstm": D + 6 * H, "minlstm_log": D + 7 * H}
    n_states = {"gru": 1, "lstm": 2}   # GRU and LSTM also keep their (B, H) initial states
    for name, floats in per_position.items():
        assert m["cache_bytes"][name][-1] == 4 * 64 * (c.T_values[-1] * floats + n_states.get(name, 0) * H), name
        assert m["peak_bytes"][name][-1] >= m["cache_bytes"][name][-1], name
