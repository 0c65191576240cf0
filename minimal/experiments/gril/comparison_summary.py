"""The GRIL comparison's metrics from its sweep's job records (``comparison``: ``summarise``, the sweep's summary):
per target and model the mean loss over seeds and its ratios to the zero predictor and to one GD step, the best
depth per recurrent family, Sec. 5.1's two claims on Fig. 3C, and where each eval curve leaves the zero predictor
(``plateau_end``) and how much it still fell at the end (``last_tenth_drop``); ``with_prefix`` files the summary of
another grid (``comparison.Config.paper_b1``'s runs, "b1_...") beside the default grid's; ``scalar_table`` puts
Fig. 3C's side of ours on the results page as numbers, per model and seed.
"""
from __future__ import annotations

import math

import numpy as np

from .comparison_models import MODELS, depth_of, family_of

__all__ = ["AT_ZERO", "summarise", "with_prefix", "plateau_end", "last_tenth_drop", "scalar_table"]

AT_ZERO = 0.97   # "at the zero predictor": loss / zero predictor >= AT_ZERO (Table 3's are 0.994-1.029)


def summarise(records):
    """Per target and model: mean/std of the loss and of loss / zero predictor, loss / GD (means over seeds, and
    per seed in seed order: "_over_zero_seeds", "_over_gd_seeds", the seeds "_seed_ids"), the training steps
    ("_steps"); per recurrent
    family the best depth ("<target>_<family>_best_over_zero" / "_over_gd"); GD's and the zero predictor's loss per
    target."""
    out, table = {}, {}
    for r in sorted(records, key=lambda r: r["config"]["seed"]):
        c = r["config"]
        target = "scalar" if c["n_out"] == 1 else "multivariate"
        table.setdefault((target, c["model"]), []).append(dict(r["result"], steps=c.get("steps"), seed=c["seed"]))
    for (target, model), res in sorted(table.items()):
        loss = np.array([x["loss"] for x in res])
        out[f"{target}_{model}"] = float(np.nanmean(loss)) if not np.all(np.isnan(loss)) else math.nan
        out[f"{target}_{model}_std"] = float(np.nanstd(loss)) if not np.all(np.isnan(loss)) else math.nan
        for k in ("over_zero", "over_gd"):
            v = np.array([x[k] for x in res])
            out[f"{target}_{model}_{k}"] = float(np.nanmean(v)) if not np.all(np.isnan(v)) else math.nan
            out[f"{target}_{model}_{k}_seeds"] = [float(x) for x in v]
        out[f"{target}_{model}_seed_ids"] = [int(x["seed"]) for x in res]
        steps = sorted({x["steps"] for x in res if x["steps"] is not None})
        if steps:
            out[f"{target}_{model}_steps"] = steps[0] if len(steps) == 1 else steps
        out[f"{target}_{model}_seeds"] = len(res)
        out[f"{target}_{model}_diverged"] = int(sum(x.get("diverged", 0) for x in res))
        out[f"{target}_{model}_n_params"] = res[0]["n_params"]
        out[f"{target}_gd"] = res[0]["loss_gd"]
        out[f"{target}_zero"] = res[0]["loss_zero"]
    for (target, model), res in sorted(table.items()):
        curves = [x.get("eval_curve") for x in res]
        if all(curves):
            ends = [plateau_end(x["eval_curve"], x["eval_curve_zero"]) for x in res]
            out[f"{target}_{model}_plateau_steps_seeds"] = [int(e) if e is not None else None for e in ends]
            out[f"{target}_{model}_left_zero_predictor_seeds"] = sum(e is not None for e in ends)
            out[f"{target}_{model}_eval_over_zero_end_seeds"] = [x["eval_curve"][-1][1] / x["eval_curve_zero"]
                                                                 for x in res]
            out[f"{target}_{model}_eval_drop_last_tenth_seeds"] = [last_tenth_drop(x["eval_curve"],
                                                                                   x["eval_curve_zero"])
                                                                   for x in res]
    for target in ("scalar", "multivariate"):
        for family in ("gated_rnn", "lru", "mingru"):
            v = [out[f"{target}_{m}"] for m in MODELS if family_of(m) == family and f"{target}_{m}" in out
                 and not math.isnan(out[f"{target}_{m}"])]
            if v:
                out[f"{target}_{family}_best"] = min(v)
            for k in ("over_zero", "over_gd"):
                v = [out[f"{target}_{m}_{k}"] for m in MODELS if family_of(m) == family
                     and f"{target}_{m}_{k}" in out and not math.isnan(out[f"{target}_{m}_{k}"])]
                if v:
                    out[f"{target}_{family}_best_{k}"] = min(v)
            if f"{target}_{family}_best_over_zero" in out:
                out[f"{target}_{family}_best_at_zero_predictor"] = bool(out[f"{target}_{family}_best_over_zero"]
                                                                        >= AT_ZERO)
        mean = {m: out[f"{target}_{m}"] for m in MODELS if f"{target}_{m}" in out
                and not math.isnan(out[f"{target}_{m}"])}
        attention = [m for m in mean if family_of(m) in ("lsa", "softmax")]
        if target == "scalar" and "softmax_2" in mean and len(attention) > 1:    # Sec. 5.1 says it of Fig. 3C
            out[f"{target}_softmax_2_closest_non_recurrent"] = bool(min(attention, key=mean.get) == "softmax_2")
        one_layer = [m for m in mean if family_of(m) in ("gated_rnn", "lru", "mingru") and depth_of(m) == 1]
        if "gril_1" in mean and one_layer:
            out[f"{target}_gril_1_beats_one_layer_recurrent"] = bool(all(mean["gril_1"] < mean[m] for m in one_layer))
        for m in mean:
            out[f"{target}_{m}_at_zero_predictor"] = bool(out[f"{target}_{m}_over_zero"] >= AT_ZERO)
    return out


def with_prefix(prefix, summary):
    """``summary`` with every key prefixed: the metrics of another grid, to stand beside the default grid's."""
    return {f"{prefix}{k}": v for k, v in summary.items()}


def plateau_end(eval_curve, zero, level=AT_ZERO):
    """The first step of ``eval_curve`` ([[step, loss], ...]) whose loss is below ``level`` x the zero
    predictor's ``zero`` (the end of the plateau at the zero predictor); None if it never gets there."""
    return next((step for step, loss in eval_curve if loss < level * zero), None)


def last_tenth_drop(eval_curve, zero):
    """How much the eval loss fell over the last tenth of the run, in units of the zero predictor's loss:
    (loss at the point nearest 0.9 x the last step - the last loss) / zero; ~0 when it has stopped falling."""
    steps = np.array([s for s, _ in eval_curve], float)
    i = int(np.argmin(np.abs(steps - 0.9 * steps[-1])))
    return float((eval_curve[i][1] - eval_curve[-1][1]) / zero)


def _per_seed(values, fmt="{:.3f}"):
    return ", ".join("never" if v is None else "nan" if isinstance(v, float) and math.isnan(v) else fmt.format(v)
                     for v in values)


def scalar_table(metrics, stand_in, grids):
    """Fig. 3C (the scalar task) as a results-page table (``minimal.run.report``'s PAGE_TABLES): one row per grid
    and model that has runs, each seed's final loss on 10^4 tasks over the zero predictor's and over one GD step's
    (η*), and the step its eval curve left the zero predictor (``plateau_end``; "never"; GRIL's runs keep no eval
    curve: "n/a"), and per grid the attention model closest to GD. ``stand_in``: family -> the paper's model it
    stands in for; ``grids``: metric prefix ("" or "b1_") -> (its name in the table, the ``comparison.Config`` it
    was trained with)."""
    rows, closest, grids_text = [], [], ""
    for prefix, (name, config) in grids.items():
        attention = {}
        for model in MODELS:
            key = f"{prefix}scalar_{model}"
            if f"{key}_over_zero_seeds" not in metrics:
                continue
            if family_of(model) in ("lsa", "softmax"):
                attention[model] = metrics[f"{key}_over_zero"]
            steps = metrics.get(f"{key}_steps")
            plateau = metrics.get(f"{key}_plateau_steps_seeds")
            rows.append([f"{model} ({stand_in[family_of(model)]})", name,
                         f"{steps:,}" if isinstance(steps, int) else steps,
                         _per_seed(metrics[f"{key}_seed_ids"], "{:d}"),
                         _per_seed(metrics[f"{key}_over_zero_seeds"]), _per_seed(metrics[f"{key}_over_gd_seeds"]),
                         "n/a" if plateau is None else _per_seed(plateau, "{:,}")])
        if len(attention) > 1:
            closest.append(f"{min(attention, key=attention.get)} in the {name} grid")
        value = config.readout_scale ** 2 if config.value_scale is None else config.value_scale
        grids_text += (f" The {name} grid: AdamW at lr {config.lr:g}, weight decay {config.weight_decay:g}, output "
                       f"maps at {config.readout_scale:g} (LSA's W_V {value:g}), positional embedding std "
                       f"{config.positional_std or 0.02:g}" + ("; GRIL: the ablations' runs, lr "
                                                              f"{config.lr_gril:g}." if not prefix else "."))
    text = ("The paper shows Fig. 3C as bars without numbers; these are ours: each seed's final loss on 10^4 tasks "
            "as a multiple of the zero predictor's (1: it learned nothing) and of one GD step's (1: GD's loss), and "
            f"the step its eval curve (2,000 tasks) first fell below {AT_ZERO} x the zero predictor. App. B.1 trains "
            "for up to 300,000 steps." + grids_text)
    if closest:
        text += " The attention model with the lowest mean loss: " + "; ".join(closest) + "."
    return {"title": "Fig. 3C, the scalar task, per model and seed", "text": text,
            "header": ["model (stands in for)", "grid", "steps", "seeds", "loss / zero predictor",
                       "loss / one GD step", "left the zero predictor at step"],
            "rows": rows}
