"""A stand-in experiment module for the CLI and reproduce tests (imported by them; collects no tests)."""
import types
from dataclasses import dataclass


def fake_experiment(done=None, error=None, **attrs):
    """An experiment module: Config(size=10), quick() size 1, run returns {"size": size} (or raises
    RuntimeError(error) when ``error`` is given), PAPER {"size": 10}; ``done`` (None: no ``finished``) says
    whether the full grid is on disk; ``attrs`` are added (e.g. plot)."""
    @dataclass
    class Config:
        size: int = 10

        @classmethod
        def quick(cls):
            return cls(size=1)

    def run(config, out_dir=None, progress=True):
        if error is not None:
            raise RuntimeError(error)
        return {"size": config.size}

    mod = types.SimpleNamespace(Config=Config, PAPER={"size": 10}, run=run, **attrs)
    if done is not None:
        mod.finished = lambda config: done and config == Config()
    return mod
