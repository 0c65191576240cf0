"""Fig. 2 of Feng et al. (Sec. 4.2) and its table for a run of the Shakespeare experiment (``shakespeare``): each
model's test-loss curve and best against the paper's. ``paper`` is the paper's numbers keyed as
``shakespeare.PAPER`` ("test_loss_<kind>", "steps_to_best_<kind>"), ``labels`` the models' names
(``shakespeare.LABELS``); ``shakespeare.plot`` passes that module's own.
"""
from __future__ import annotations

from .shakespeare_model import KINDS, base_kind

__all__ = ["plot_curves", "table"]


def table(metrics, paper, labels):
    """Rows (model, ours: best test loss (subset), steps to best, final test loss (the scored model on every test
    window), evaluated every; paper: best test loss, steps to best) for every model in ``metrics`` and Mamba (the
    paper's only)."""
    rows = []
    for kind in (*[k for k in KINDS if k in metrics["models"]], "mamba"):
        ours = metrics["models"].get(kind)
        rows.append({"model": labels[kind],
                     "best_test_loss_subset": None if ours is None else round(ours["best_test_loss"], 3),
                     "final_test_loss": None if ours is None else round(ours["final_test_loss"], 3),
                     "steps_to_best": None if ours is None else ours["steps_to_best"],
                     "eval_every": None if ours is None else ours.get("eval_every",
                                                                      metrics["config"]["eval_every"]),
                     "n_params": None if ours is None else ours["n_params"],
                     "paper_test_loss": paper[f"test_loss_{kind}"],
                     "paper_steps_to_best": paper[f"steps_to_best_{kind}"]})
    return rows


def plot_curves(ax, metrics, paper, labels, ylim=(1.3, 3.0)):
    """Draw Fig. 2 on ``ax``: each model's test-subset curve (vanilla dashed) and the paper's best test loss of
    its kind (D = 384) as a named marker in the same colour at the step the paper reached it (``paper``'s
    ``steps_to_best_<kind>``, all within its 5,000-step runs; the values lie within 0.03 of each other, so lines
    would overlap); Mamba's in grey."""
    colours = {"mingru": "C0", "minlstm": "C1", "attention": "C2", "mamba": "gray"}
    markers = {"mingru": "<", "minlstm": ">", "attention": "^", "mamba": "v"}
    for kind, m in metrics["models"].items():
        base = base_kind(kind)
        ax.plot(m["curve_steps"], m["curve"], color=colours[base], ls="--" if kind.endswith("_vanilla") else "-",
                label=f"{labels[kind]} (ours, D = {metrics['config']['D']})")
    bases = [k for k in ("mingru", "minlstm", "attention") if any(base_kind(m) == k for m in metrics["models"])]
    for base in (*bases, "mamba"):
        ax.plot([paper[f"steps_to_best_{base}"]], [paper[f"test_loss_{base}"]], markers[base], color=colours[base],
                ms=7, label=f"{labels[base]}, paper (D = 384): {paper[f'test_loss_{base}']:.3f} at step "
                            f"{paper[f'steps_to_best_{base}']:,}")
    ax.set(xlabel="training step", ylabel="test loss (nats / character)", ylim=ylim,
           title="Fig. 2 at CPU size: test loss on a fixed subset of test windows")
    ax.legend(fontsize=8)
