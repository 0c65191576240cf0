"""Table 1 of Feng et al. as a figure: selective-copying accuracy against depth per cell, ours (a result of
``selective_copy``, the keys of ``selective_copy_summary.summarise``) beside the paper's; ``selective_copy.plot``
draws it with that module's ``PAPER``."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _plotting

__all__ = ["plot_depths"]


def plot_depths(result, paper, out_dir, title="Selective copying vs depth (Table 1)", name="selective_copy"):
    """Accuracy vs depth per kind (mean ± std over seeds), the paper's Table 1 (``paper``: its
    "<kind>_<depth>" and "<kind>_<depth>_std") beside it; saved as ``out_dir/<name>.png``. Returns [png path]."""
    plt = _plotting.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for i, kind in enumerate(("mingru", "minlstm")):
        for form, (suffix, fmt, dx) in {"log space": ("", "o-", 0.0), "vanilla": ("_vanilla", "^--", 0.15)}.items():
            depths = [d for d in (1, 2, 3) if f"{kind}_{d}{suffix}" in result]
            if depths:
                ax.errorbar(np.array(depths) + 0.05 * i + dx, [result[f"{kind}_{d}{suffix}"] for d in depths],
                            [result[f"{kind}_{d}{suffix}_std"] for d in depths], fmt=fmt, capsize=3,
                            color=f"C{i}", label=f"{kind}, {form} (ours)")
        ax.errorbar(np.array((1, 2, 3)) + 0.05 * i + 0.3, [paper[f"{kind}_{d}"] for d in (1, 2, 3)],
                    [paper[f"{kind}_{d}_std"] for d in (1, 2, 3)], fmt="x:", capsize=3, color=f"C{i}", alpha=0.6,
                    label=f"{kind} (paper, Table 1)")
    for j, kind in enumerate(("gru", "lstm")):
        for key in [k for k in result.get("rows", []) if k.startswith(kind + "_")]:
            ax.errorbar([int(key.split("_")[1]) - 0.1], [result[key]], [result[f"{key}_std"]], fmt="s",
                        color=f"C{2 + j}", capsize=3, label=f"{kind} (ours)")
    ax.set(xlabel="layers", ylabel="accuracy on data tokens (%)", xticks=(1, 2, 3), ylim=(0, 102),
           title=title)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
