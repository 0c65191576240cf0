"""bench/reverse_order.py: the min cells' reverse pass in each channel order (it runs and agrees, not how fast)."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "reverse_order.py"


def test_both_channel_orders_give_the_same_gradients_and_each_kernel_is_timed_twice():
    res = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "2", "--shape", "3", "5", "40"],
                         capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))
    assert res.returncode == 0, res.stderr      # run() asserts that the two orders agree bit for bit
    lines = res.stdout.splitlines()
    assert lines[0].startswith("minGRU's reverse pass over (B, T, H) = (3, 5, 40) float32")
    rows = {line[:28].rstrip(): [float(v) for v in line[28:].split()] for line in lines[2:]}
    assert list(rows) == ["descending (the library's)", "ascending channels", "forward in time"]
    assert all(len(v) == 2 and min(v) > 0 for v in rows.values())
