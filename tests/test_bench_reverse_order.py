"""bench/reverse_order.py: the min cells' reverse pass in each order (it runs and agrees, not how fast)."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "reverse_order.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))


def test_both_orders_give_the_same_gradients_and_each_kernel_is_timed_twice():
    res = _run("--repeats", "2", "--shape", "4", "16", "256")
    assert res.returncode == 0, res.stderr      # run() raises unless the two orders agree byte for byte
    lines = res.stdout.splitlines()
    assert lines[0].startswith("minGRU's reverse pass over (B, T, H) = (4, 16, 256) float32")
    rows = {line[:28].rstrip(): [float(v) for v in line[28:].split()] for line in lines[2:]}
    assert list(rows) == ["descending (the library's)", "ascending rows, channels", "forward in time"]
    assert all(len(v) == 2 and min(v) > 0 for v in rows.values())


def test_a_bad_shape_or_count_is_named():
    for args, words in ((("--shape", "-1", "5", "40"), "shape must be three sizes >= 1"),
                        (("--repeats", "0"), "repeats must be >= 1")):
        res = _run(*args)
        assert res.returncode == 2 and words in res.stderr
