"""Wording the works' page notes share (``minimal.experiments.notes``): the run's step count as text, and the
phrase for a number computed in closed form."""
from __future__ import annotations

__all__ = ["run_steps", "CLOSED"]


def run_steps(config, metrics):
    """The run's step count as text ("2,400"; "?" when its config gives none)."""
    steps = config.get("steps", "?")
    return f"{steps:,}" if isinstance(steps, int) else steps


# what a note says of a number computed in closed form
CLOSED = "a closed form evaluated on our fixed evaluation tasks, nothing trained"
