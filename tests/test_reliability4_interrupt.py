"""Interrupting `python -m minimal reproduce` (issue 47, item 4): Ctrl-C and SIGTERM each end in one line that names
the checkpoint saved and the command that resumes, with exit codes 130 and 143, and the second run resumes from
the first's checkpoint. A real run of the quick teacher-student experiment (16,000 steps, about a minute and a half
on one core), interrupted after 25 s of training time, then resumed and interrupted again.

Measured on the shared 2-core machine: about 70 s."""
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


def _interrupt(out, sig, wait=25.0):
    proc = subprocess.Popen([sys.executable, "-m", "minimal", "reproduce", "zucchet", "--quick", "--only",
                             "teacher_student", "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(wait)
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
