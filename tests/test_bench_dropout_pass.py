"""bench/dropout_pass.py: dropout's compiled pass against its NumPy lines (it runs and the two agree bit for bit,
not how fast)."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "dropout_pass.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))


def test_both_are_timed_after_they_agree():
    res = _run("--repeats", "2", "--shape", "3", "7", "5")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "x (3, 7, 5) float32, rate 0.1, 2 rounds; the same masks, outputs and states"
    assert [line.split()[0] for line in lines[1:3]] == ["compiled", "NumPy"]
    assert all(float(line.split(" ms")[0].split()[-1]) > 0 for line in lines[1:3])


def test_a_bad_shape_or_count_is_named():
    for args, words in ((("--shape", "0", "5"), "shape must be sizes >= 1"),
                        (("--repeats", "0"), "repeats must be >= 1")):
        res = _run(*args)
        assert res.returncode == 2 and words in res.stderr
