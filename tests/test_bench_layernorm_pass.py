"""bench/layernorm_pass.py: LayerNorm's float32-register kernels against its float64-register ones (it runs and
the two agree within a few float32 roundings, not how fast)."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "layernorm_pass.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))


def test_both_are_timed_after_they_agree():
    res = _run("--repeats", "2", "--shape", "3", "7", "5")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "x (3, 7, 5) float32, 2 rounds; the outputs within a few float32 roundings"
    assert [" ".join(line.split()[:3]) for line in lines[1:5]] == [
        "forward, f32 registers", "forward, f64 registers", "backward, f32 registers", "backward, f64 registers"]
    assert all(float(line.split(" us")[0].split()[-1]) > 0 for line in lines[1:5])


def test_a_bad_shape_or_count_is_named():
    for args, words in ((("--shape", "0", "5"), "shape must be two or more sizes >= 1"),
                        (("--shape", "5"), "shape must be two or more sizes >= 1"),
                        (("--repeats", "0"), "repeats must be >= 1")):
        res = _run(*args)
        assert res.returncode == 2 and words in res.stderr
