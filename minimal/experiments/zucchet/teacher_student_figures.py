"""Fig. 2A and Fig. 2C of Zucchet et al. (Sec. 3.1) for a student trained by ``teacher_student``: the pruned
student's weights, and the kernels of its merged output gates; ``teacher_student.plot`` saves both.

Both take the student's params, the run's ``teacher_student.Config`` (its ``prune_tol`` and ``lam_tol``) and
optionally an ``identification.Pruned`` of the params (default: pruned by magnitude), and order the kept recurrent
neurons key-value (KV), then query (Q), then other (by λ).
"""
from __future__ import annotations

import numpy as np

from ...analysis import identification

__all__ = ["figure_pruned_weights", "figure_merged_kernel"]


def _sorted_pruned(params, config, pruned=None):
    """The pruned student (default: ``identification.prune`` by magnitude) with its recurrent neurons ordered
    KV, then Q, then other (by λ)."""
    pruned = identification.prune(params, tol=config.prune_tol) if pruned is None else pruned
    kinds = identification.neuron_kinds(pruned.lam, config.lam_tol)
    order = np.concatenate([np.flatnonzero(kinds == k) for k in ("kv", "q", "other")])
    p = dict(pruned.params)
    for k in ("W_in_m", "W_in_x", "nu"):
        p[k] = p[k][order]
    for k in ("W_out_m", "W_out_x"):
        p[k] = p[k][:, order]
    return p, pruned.lam[order], kinds[order]


def figure_pruned_weights(params, config, pruned=None):
    """Fig. 2A: the student's weights after pruning (``pruned``: an ``identification.Pruned`` of params,
    default by magnitude), recurrent neurons ordered KV, Q, other."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    p, lam, kinds = _sorted_pruned(params, config, pruned)
    panels = [("W_in_m", p["W_in_m"]), ("W_in_x", p["W_in_x"]), ("λ", lam[:, None]),
              ("W_out_m", p["W_out_m"]), ("W_out_x", p["W_out_x"]), ("D", p["D"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 3.6),
                             gridspec_kw={"width_ratios": [max(a.shape[1], 20) + 2 for _, a in panels]})
    xlabels = {"W_in_m": "input", "W_in_x": "input", "λ": "λ", "W_out_m": "recurrent neuron",
               "W_out_x": "recurrent neuron", "D": "output-gating neuron"}
    ylabels = {"W_out_m": "output-gating neuron", "W_out_x": "output-gating neuron", "D": "output"}
    for ax, (name, a) in zip(axes, panels):
        vmax = max(float(np.max(np.abs(a))), 1e-12)
        im = ax.imshow(a, cmap="RdBu_r" if name != "λ" else "viridis", vmin=-vmax if name != "λ" else 0,
                       vmax=vmax if name != "λ" else 1, aspect="auto", interpolation="nearest")
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_xlabel(xlabels[name], fontsize=8)
        ax.set_ylabel(ylabels.get(name, "recurrent neuron (KV, Q, other)"), fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        narrow = a.shape[1] < 20   # a few columns: a thicker, shorter-aspect bar that still spans the panel
        fig.colorbar(im, ax=ax, fraction=0.3 if narrow else 0.1, aspect=8 if narrow else 20, pad=0.04)
    n_kv, n_q = int(np.sum(kinds == "kv")), int(np.sum(kinds == "q"))
    fig.suptitle(f"pruned student: {len(lam)} recurrent neurons ({n_kv} KV, {n_q} Q), {p['D'].shape[1]} "
                 f"output gates")
    fig.tight_layout()
    return fig


def figure_merged_kernel(params, config, pruned=None):
    """Fig. 2C: y_i = h^T K_i h after merging the output gates, on the pruned neurons (KV first, then Q;
    ``pruned`` as in ``figure_pruned_weights``)."""
    import matplotlib.pyplot as plt

    p, lam, kinds = _sorted_pruned(params, config, pruned)
    K = identification.merged_kernel(p)
    n_kv, n_q = int(np.sum(kinds == "kv")), int(np.sum(kinds == "q"))
    fig, axes = plt.subplots(1, K.shape[0], figsize=(3.2 * K.shape[0], 3.9))
    for i, ax in enumerate(np.atleast_1d(axes)):
        vmax = max(float(np.max(np.abs(K[i]))), 1e-12)
        ax.imshow(K[i], cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        for edge in (n_kv - 0.5, n_kv + n_q - 0.5):
            ax.axhline(edge, color="k", lw=0.5)
            ax.axvline(edge, color="k", lw=0.5)
        ax.set_title(f"K_{i + 1} (output {i + 1})")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set(xlabel="pruned neuron j (KV | Q)", ylabel="pruned neuron i (KV | Q)")
        fig.colorbar(ax.images[0], ax=ax, fraction=0.046)   # each kernel its own scale
    fig.suptitle(f"merged output-gating kernels on the pruned neurons: {n_kv} KV | {n_q} Q | "
                 f"{len(kinds) - n_kv - n_q} other")
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig
