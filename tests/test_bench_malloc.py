"""bench/malloc.py: a training step under each allocator setting available here (it runs, not how fast)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "malloc.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and its page-fault counters")
def test_each_allocator_setting_times_the_row_and_the_tuned_heap_adds_no_faults():
    # A first run fills Numba's cache (CI starts with an empty one): a process that compiles the kernels grows glibc's
    # heap and raises its mmap threshold as it frees the compiler's buffers, after which even glibc as it comes takes
    # no fault a step (and the tuned process, loading what the first one compiled, may take more).
    assert _run("--rows", "selective copy mingru x2", "--rounds", "1", "--steps", "1").returncode == 0
    res = _run("--rows", "selective copy mingru x2", "--rounds", "1", "--steps", "2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    rows = [line for line in lines[1:] if line.startswith("selective copy mingru x2")]
    settings = [line[31:73].rstrip() for line in rows]
    assert settings[:2] == ["glibc malloc, as it comes", "glibc malloc, speed.tune()'s thresholds"]
    assert len(rows) == (4 if os.path.exists("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") else 2)
    ms = [float(line.split()[-2]) for line in rows]
    faults = [float(line.split()[-1]) for line in rows]
    assert all(m > 0 for m in ms) and all(f >= 0 for f in faults)
    # the thresholds keep the step's temporaries on the heap: never more faults than glibc as it comes
    assert faults[1] <= faults[0]


def test_an_unknown_row_is_named():
    res = _run("--rows", "no such row", "--rounds", "1", "--steps", "1")
    assert res.returncode != 0 and "no bench train row named ['no such row']" in res.stderr
