"""The metrics of the Shakespeare experiment (``shakespeare``) read off its evaluation curves: per run the flat
metrics that ``shakespeare.PAPER`` names (``summarise``), and their mean and spread over seeds (``across_seeds``).

What they find (best test loss on the fixed subset, mean ± std over seeds 0-2; notebook ``minrnn_d_shakespeare``
asserts each number):
    - ``Config()``: every model was stopped by the rule, at the plateau after its second cut. minGRU 1.585 ± 0.004,
      minLSTM 1.574 ± 0.011, vanilla minGRU 1.568 ± 0.014, Transformer 1.658 ± 0.010; ratio to the Transformer
      0.956 ± 0.004 (minGRU), 0.950 ± 0.012 (minLSTM), 0.946 ± 0.005 (vanilla minGRU), paper 1.001 / 1.005: at
      D = 64 the minimal RNNs end about 5 % below the same-size Transformer, in every seed ("close" under
      ``TOLERANCE``: within 10 %, not the 3 % of "comparable"). Steps to best: the minimal RNNs 4,575-6,250, the
      Transformer 6,450-8,175 (later than minGRU in every seed); Transformer over minGRU 1.31 ± 0.14 (paper
      2000 / 575 = 3.48: "differs"). At equal loss, the paper's "to achieve comparable performance": the minimal
      RNNs first reach the Transformer's best at steps 2,075-2,975, and the Transformer needs 2.2-3.8 times as many
      steps to get there (minGRU: 2.89 averaged over seeds, "close" to 3.48). No model's test loss rose more than
      0.001 after its best (the paper's Transformer over-fits, Fig. 2);
    - ``Config.fixed()`` (2,400 steps): minGRU 1.644 ± 0.006, minLSTM 1.646 ± 0.003, vanilla minGRU 1.637 ± 0.003,
      Transformer 1.872 ± 0.001; ratios 0.878 ± 0.003, 0.880 ± 0.002, 0.874 ± 0.002 ("differs"); every best in the
      last 100 steps, where the schedule has run out, so the steps-to-best ratio (1.00 ± 0.01) measures the
      schedule. Training until the best stops improving lowers the minimal RNNs' bests by 0.06-0.07 nats and the
      Transformer's by 0.21.
"""
from __future__ import annotations

import numpy as np

__all__ = ["CLAIM", "steps_to_reach", "summarise", "across_seeds"]

CLAIM = 0.03   # "comparable": minGRU / minLSTM at most 3 % above the same-size Transformer's test loss


def steps_to_reach(model, target):
    """The first evaluation step at which ``model``'s test-subset curve is at or below ``target``; None if never."""
    return next((s for s, loss in zip(model["curve_steps"], model["curve"]) if loss <= target), None)


def _equal_loss_ratio(attention, model):
    """The Transformer's steps to its best over the steps ``model`` needs to first reach that loss (NaN if never)."""
    reach = steps_to_reach(model, attention["best_test_loss"])
    return attention["steps_to_best"] / reach if reach else float("nan")


def summarise(out):
    """Add the flat metrics that ``PAPER`` names and, per minimal RNN, "ratio_to_transformer" and "claim_holds".

    test_loss_<kind>: the lowest test loss among the evaluations (the fixed test subset of ``eval_windows``
    windows, every ``eval_every`` steps), as the paper reports its best; steps_to_best_<kind>: the step of that
    evaluation; final_test_loss_<kind>: the scored model (the best evaluated weights with ``patience``, else the
    last) on every test window; ratio_<kind>_to_transformer: test_loss over the Transformer's (paper: 1.001
    minGRU, 1.005 minLSTM), final_ratio_<kind>_to_transformer the same on every window; claim_holds: at most
    CLAIM = 3 % above the Transformer's best; steps_ratio_attention_to_<kind>: the Transformer's steps to its
    best over the RNN's to its own (paper: 2000 / 575 = 3.48 for minGRU, "~2.5x more");
    steps_to_transformer_best_<kind>: the first evaluation at or below the Transformer's best (None if none);
    steps_ratio_attention_to_<kind>_at_transformer_best: the Transformer's steps to its best over those (NaN if
    none), the paper's "to achieve comparable performance" read at equal loss. Returns ``out``, updated."""
    m = out["models"]
    for kind, r in m.items():
        out[f"test_loss_{kind}"] = r["best_test_loss"]
        out[f"final_test_loss_{kind}"] = r["final_test_loss"]
        out[f"steps_to_best_{kind}"] = r["steps_to_best"]
    if "attention" in m:
        ref, ref_final = m["attention"]["best_test_loss"], m["attention"]["final_test_loss"]
        for kind in m:
            if kind == "attention":
                continue
            r = m[kind]
            r["ratio_to_transformer"] = out[f"ratio_{kind}_to_transformer"] = r["best_test_loss"] / ref
            out[f"final_ratio_{kind}_to_transformer"] = r["final_test_loss"] / ref_final
            r["claim_holds"] = bool(r["best_test_loss"] <= (1 + CLAIM) * ref)
            out[f"steps_ratio_attention_to_{kind}"] = m["attention"]["steps_to_best"] / r["steps_to_best"]
            out[f"steps_to_transformer_best_{kind}"] = steps_to_reach(r, ref)
            out[f"steps_ratio_attention_to_{kind}_at_transformer_best"] = _equal_loss_ratio(m["attention"], r)
    return out


def across_seeds(runs):
    """Per model over seeds (``runs``: {seed: run metrics}): best test loss, steps to best, and the ratios to the
    Transformer (``summarise``'s, the one at equal loss included), each as the per-seed list, its mean and its
    standard deviation (ddof = 0); the number of seeds whose best is the run's last evaluation
    ("best_at_last_eval_seeds": still improving when the run ended)."""
    out = {"seeds": sorted(runs)}
    kinds = sorted(set.intersection(*(set(r["models"]) for r in runs.values()))) if runs else []
    for kind in kinds:
        per = [runs[s]["models"][kind] for s in sorted(runs)]
        for name, vals in (("test_loss", [m["best_test_loss"] for m in per]),
                           ("steps_to_best", [m["steps_to_best"] for m in per])):
            out[f"{name}_{kind}_seeds"] = vals
            out[f"{name}_{kind}"] = float(np.mean(vals))
            out[f"{name}_{kind}_std"] = float(np.std(vals))
        out[f"best_at_last_eval_{kind}_seeds"] = sum(m["steps_to_best"] == max(m["curve_steps"]) for m in per)
        at_tf_best = f"steps_ratio_attention_to_{kind}_at_transformer_best"
        for key in (f"ratio_{kind}_to_transformer", f"steps_ratio_attention_to_{kind}", at_tf_best):
            if key == at_tf_best:   # computed from the curves: runs saved before this metric existed have it too
                vals = [_equal_loss_ratio(runs[s]["models"]["attention"], runs[s]["models"][kind])
                        if kind != "attention" and "attention" in runs[s]["models"] else None for s in sorted(runs)]
            else:
                vals = [runs[s].get(key) for s in sorted(runs)]
            if all(v is not None for v in vals):
                out[f"{key}_seeds"] = vals
                out[key] = float(np.mean(vals))
                out[f"{key}_std"] = float(np.std(vals))
    return out
