"""How the GRIL experiments judge the paper's absolute losses (``minimal.run.verdicts``), in one place."""
from __future__ import annotations

from ...run.verdicts import Tolerance

__all__ = ["LOSS_TOLERANCE", "loss_tolerances"]

# The paper's absolute losses (Tables 5-7, printed to three digits with spreads of 0.001-0.002) are judged alike in
# every experiment that reports one (regression, ablations, multistep, comparison): "matches" only when ours rounds
# to the printed digits, "close" within 5% (a unit or two of the last digit is the paper's own spread).
LOSS_TOLERANCE = Tolerance("rel", 0.0, 0.05)


def loss_tolerances(paper):
    """{key: LOSS_TOLERANCE} for every absolute loss of a ``PAPER`` dict: a float the paper prints (no ratio, whose
    key has "_over_", and no claim encoded as 1.0)."""
    return {k: LOSS_TOLERANCE for k, v in paper.items()
            if isinstance(v, float) and "_over_" not in k and v != 1.0}
