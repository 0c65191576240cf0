"""bench/f32_gates.py: the min cells' one passes (vanilla, and log space's linear form) in float64 and in float32
registers (it runs and the two agree to float32 rounding, not how fast)."""
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "f32_gates.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))


def test_each_form_is_timed_and_the_two_agree_to_float32_rounding():
    res = _run("--repeats", "2", "--shape", "3", "9", "40")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "(B, T, H) = (3, 9, 40) float32, 2 rounds"
    names = [line.split(" ms")[0].rsplit(None, 1)[0].strip() for line in lines[1:9]]
    assert names == [f"{cell} {regs} registers" for cell in ("minGRU", "minLSTM", "log minGRU", "log minLSTM")
                     for regs in ("f64", "f32")]
    assert all(float(line.split(" ms")[0].split()[-1]) > 0 for line in lines[1:9])
    diffs = [float(d) for line in lines[9:13] for d in re.findall(r" (\d\.\de-\d\d)", line)]
    # tests/test_gates_numba.py and tests/test_min_log_linear.py hold the kernels' states and j to 2e-6
    assert len(diffs) == 3 + 5 + 6 + 7 and max(diffs) < 2e-6


def test_a_bad_shape_or_count_is_named():
    for args, words in ((("--shape", "0", "5", "40"), "shape must be three sizes >= 1"),
                        (("--repeats", "0"), "repeats must be >= 1")):
        res = _run(*args)
        assert res.returncode == 2 and words in res.stderr
