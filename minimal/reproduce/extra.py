"""The committed files that ``python -m minimal reproduce WORK --full`` does not write, and the one command that
writes each: ``python -m minimal.reproduce.extra NAME`` from the repository root, NAME as ``data/`` names the file
without its suffix (``minrnn/shakespeare_small``; ``python -m minimal.reproduce.extra`` alone lists them).

With ``minimal.reproduce.work`` this is the only code that writes into ``data/``: an experiment's ``run`` returns
its metrics and writes trained weights only where it is told (``save_weights_path``). ``minimal.data.COMMANDS``
names these commands in the errors that say how to rewrite a missing or damaged file (a test keeps the two alike).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..data import data_path
from ..run import io

__all__ = ["FILES", "write"]


def _shakespeare_weights(variant, weights, **fields):
    """``shakespeare.run(Config.<variant>(**fields), save_weights_path=<weights>)``: the trained params and their
    metrics beside them."""
    def make():
        from ..experiments.minrnn import shakespeare as S

        return S.run(getattr(S.Config, variant)(**fields), save_weights_path=getattr(S, weights))
    return make


def _shakespeare_seed(name, seed):
    """``shakespeare_runs.run_seed(seed, name)``'s metrics (curves only) to ``data/minrnn/shakespeare_<name>_seed<s>``."""
    def make():
        from ..experiments.minrnn import shakespeare_runs as SR

        out = SR.run_seed(seed, name)
        io.write_json(data_path("minrnn", f"shakespeare_{name}_seed{seed}.json"), out)
        return out
    return make


def _step_cpu():
    from ..experiments.minrnn import shakespeare_runs as SR

    out = SR.step_cpu_table()
    io.write_json(SR.STEP_CPU, out)
    return out


PAPER_STEPS = 781_250   # Zucchet et al. App. B.1: 1000 epochs of 50,000 sequences at batch 64


def checkpoint_folder():
    """Where the long runs here keep their checkpoints: a per-user cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``)/minimal/checkpoints, so that an interrupted run resumes when its command is run again."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minimal" / "checkpoints"


def _teacher_student_paper_optimiser():
    """``teacher_student.run(Config.paper_optimiser(steps=PAPER_STEPS))``: the paper's optimiser for the paper's
    781,250 steps (CPU-hours: the seconds per step of the last stretch are in the sidecar,
    ``data/zucchet/teacher_student_paper_optimiser_full.json``), checkpointed every 5,000 steps in
    ``checkpoint_folder()``, with float32 subnormals flushed to zero (``minimal.run.speed.flush_subnormals``,
    JAX's CPU arithmetic: the paper's runs are JAX). The sidecar's ``subnormals_flushed_from_step`` says from
    which step: the committed run trained its first 505,157 steps without flushing (several times slower per step
    by then: the module docstring of ``speed``) and was resumed from that checkpoint with it. The sidecar also
    keeps the run's analysis (``PAPER_OPTIMISER_METRICS``), which the results page shows."""
    from ..experiments.zucchet import teacher_student as TS
    from ..run import checkpoint, speed

    folder = checkpoint_folder()
    folder.mkdir(parents=True, exist_ok=True)
    ckpt = folder / f"teacher_student_paper_optimiser_{PAPER_STEPS}.ckpt.npz"
    first = checkpoint.load_checkpoint(ckpt).step if ckpt.exists() else 0
    flushed = speed.flush_subnormals()
    weights = data_path("zucchet", "teacher_student_paper_optimiser_full.npz")
    out = TS.run(TS.Config.paper_optimiser(steps=PAPER_STEPS), progress=sys.stderr.isatty(),
                 save_weights_path=weights, checkpoint_path=ckpt)
    io.update_meta(weights, {**{k: out[k] for k in PAPER_OPTIMISER_METRICS},
                             "subnormals_flushed_from_step": first if flushed else None})
    return out


# what the sidecar of the paper-optimiser run keeps of its analysis (``teacher_student.analyse``), for the results
# page and notebook zucchet_d (Sec. 9)
PAPER_OPTIMISER_METRICS = ("loss", "relative_loss", "kv_score", "q_score", "poly_distance", "hidden_removed",
                           "gates_removed", "n_kv", "n_q", "n_other")


FILES = {   # data/<NAME>.*: what writes it
    "minrnn/shakespeare_small": _shakespeare_weights("small", "SMALL_WEIGHTS"),
    "minrnn/shakespeare_fixed": _shakespeare_weights("fixed", "FIXED_WEIGHTS"),
    "minrnn/shakespeare_vanilla": _shakespeare_weights("fixed", "VANILLA_WEIGHTS",
                                                       kinds=("mingru_vanilla", "minlstm_vanilla"), eval_every=100),
    **{f"minrnn/shakespeare_{name}_seed{s}": _shakespeare_seed(name, s) for name in ("full", "fixed") for s in (1, 2)},
    "minrnn/shakespeare_step_cpu": _step_cpu,
    "zucchet/teacher_student_paper_optimiser_full": _teacher_student_paper_optimiser,
}


def write(name):
    """Train or measure what ``data/<name>.*`` holds and write it there; returns the metrics written."""
    if name not in FILES:
        raise ValueError(f"name must be one of {sorted(FILES)}, got {name!r}")
    return FILES[name]()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m minimal.reproduce.extra NAME, one of:\n  " + "\n  ".join(sorted(FILES)))
        return 2
    write(argv[0])
    print(f"wrote data/{argv[0]}.*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
