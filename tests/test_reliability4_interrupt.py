"""Interrupting `python -m minimal reproduce` (issue 47, item 4): Ctrl-C and SIGTERM each end in one line that names
the checkpoint saved and the command that resumes, with exit codes 130 and 143, and the second run resumes from
the first's checkpoint. A real run of the quick teacher-student experiment (16,000 steps, about a minute and a half
on one core), interrupted 5 s after its first checkpoint, then resumed and interrupted 5 s after it saves again.

Measured on the shared 2-core machine: about 80 s."""
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LINE = re.compile(r"^interrupted \((Ctrl-C|SIGTERM)\): checkpoint saved at step ([\d,]+) of 16,000 in (\S+); "
                  r"`python -m minimal reproduce zucchet --quick --only teacher_student --out (\S+) --no-progress` "
                  r"resumes from it")


def _checkpoint_mtime(out):
    """The newest checkpoint's modification time under ``out`` (ns), or None while there is none."""
    times = [p.stat().st_mtime_ns for p in out.glob("**/*.ckpt.npz")]
    return max(times) if times else None


def _interrupt(out, sig, settle=5.0, deadline=600.0):
    """Start the run, wait until it has saved a checkpoint newer than any already there (so it is training, with
    the SIGTERM handler installed, past the step it resumed from), let it train ``settle`` s more, then signal it.

    Waiting for the checkpoint rather than a fixed time: start-up (imports, Numba's cache) took over 25 s on a
    loaded CI machine, and a SIGTERM before ``train`` installs its handler ends the process with no message."""
    before = _checkpoint_mtime(out)
    proc = subprocess.Popen([sys.executable, "-m", "minimal", "reproduce", "zucchet", "--quick", "--only",
                             "teacher_student", "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while _checkpoint_mtime(out) in (None, before):
        if proc.poll() is not None or time.monotonic() - t0 > deadline:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"no new checkpoint within {time.monotonic() - t0:.0f} s (exit code {proc.returncode}): "
                        f"{stderr.strip().splitlines()[-5:]}")
        time.sleep(0.2)
    time.sleep(settle)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr.strip().splitlines()


def test_ctrl_c_and_sigterm_say_where_the_checkpoint_is_and_how_to_resume(tmp_path):
    out = tmp_path / "out"
    rc, lines = _interrupt(out, signal.SIGINT)
    assert rc == 130, lines[-5:]
    m = LINE.match(lines[-1])
    assert m and m.group(1) == "Ctrl-C", lines[-3:]
    assert not any("Traceback" in line for line in lines), lines
    first, path = int(m.group(2).replace(",", "")), Path(m.group(3))
    assert first > 0 and path.is_file()
    rc, lines = _interrupt(out, signal.SIGTERM)       # the same command resumes, then SIGTERM
    assert rc == 143, lines[-5:]
    m = LINE.match(lines[-1])
    assert m and m.group(1) == "SIGTERM" and Path(m.group(3)) == path, lines[-3:]
    assert int(m.group(2).replace(",", "")) > first, "the second run did not resume from the first's checkpoint"
