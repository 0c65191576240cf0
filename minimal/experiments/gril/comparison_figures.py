"""The GRIL comparison's figure (``comparison.plot``; Tian et al., Fig. 3C and Fig. 6): per target, each model's
loss / zero predictor as a bar, one GD step as a line, the runs at App. B.1's optimiser ("b1_" keys) as dots, the
paper's numbers as crosses on their stand-ins.
"""
from __future__ import annotations

import numpy as np

from .._plotting import legend_beside, pyplot, save_figure
from .comparison_models import MODELS, family_of

__all__ = ["plot"]


def plot(result, out_dir, paper, stand_in):
    """Fig. 3C / 6 as bars: loss / zero predictor per model and target (``result``: ``comparison.summarise``'s
    keys), one GD step as a line, the App. B.1 runs ("b1_<target>_<model>_over_zero") as dots, ``paper`` (family -> the paper's loss / its zero predictor, multivariate: Table
    3's baselines without LP, Table 6's GRIL) as crosses; ``stand_in``: family -> the paper's model it stands in
    for (the tick labels). Returns the figure's path."""
    plt = pyplot()
    targets = [t for t in ("scalar", "multivariate") if f"{t}_gd" in result]
    fig, axes = plt.subplots(1, max(1, len(targets)), figsize=(7.5 * max(1, len(targets)), 4.2), squeeze=False)
    for ax, target in zip(axes[0], targets):
        names = [m for m in MODELS if f"{target}_{m}_over_zero" in result]
        x = np.arange(len(names))
        ax.bar(x, [result[f"{target}_{m}_over_zero"] for m in names], color="C0")
        ax.axhline(result[f"{target}_gd"] / result[f"{target}_zero"], color="k", ls="--", lw=0.8,
                   label="one optimal GD step")
        ax.axhline(1.0, color="k", ls=":", lw=0.8, label="zero predictor")
        b1 = [(i, result[f"b1_{target}_{m}_over_zero"]) for i, m in enumerate(names)
              if f"b1_{target}_{m}_over_zero" in result]
        if b1:   # the finished runs at App. B.1's optimiser (``comparison.Config.paper_b1``), beside ours
            ax.plot([i for i, _ in b1], [v for _, v in b1], "o", ls="none", color="C1", ms=6,
                    label="App. B.1 lr, weight decay (finished seeds)")
        if target == "multivariate":   # the paper's numbers, one marker series (a single legend entry)
            keys = [(i, paper[family_of(m)]) for i, m in enumerate(names) if family_of(m) in paper]
            if keys:
                ax.plot([i for i, _ in keys], [v for _, v in keys], "x", ls="none", color="C3", ms=8,
                        label="paper: Table 3 (no LP; best depth), Table 6")
        ax.set_xticks(x, [f"{m}\n({stand_in[family_of(m)]})" for m in names], fontsize=7, rotation=30)
        ax.set(xlabel="model (the paper's model it stands in for)", ylabel="loss / zero predictor",
               title=f"{target}: Fig. {'3C' if target == 'scalar' else '6'}")
        legend_beside(ax)
    return [save_figure(fig, out_dir, "comparison.png")]
