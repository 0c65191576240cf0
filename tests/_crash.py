"""A crash right after a run saved an evaluation (imported by the resume tests; collects no tests)."""
import pytest

from minimal.run import io


class Crash(Exception):
    """A crash train does not catch (no checkpoint is written on the way out), like a SIGKILL."""


def crash_after_evaluation(monkeypatch, run, at):
    """Call ``run()`` and crash (``Crash``) right after a ``.curve.json`` file got the evaluation at step ``at``
    (``minimal.run.evaluations``); afterwards ``minimal.run.io.write_json`` is the real one again."""
    real = io.write_json

    def crash(path, obj, *a, **k):
        real(path, obj, *a, **k)
        if str(path).endswith(".curve.json") and at in obj:
            raise Crash

    monkeypatch.setattr(io, "write_json", crash)
    with pytest.raises(Crash):
        run()
    monkeypatch.setattr(io, "write_json", real)
