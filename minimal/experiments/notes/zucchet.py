"""Page notes of the Zucchet et al. experiments (``minimal.experiments.zucchet``): the keys of
``minimal.experiments.notes`` for teacher_student, icl, icl_seeds, hidden_size and architectures."""
from __future__ import annotations

from .common import CLOSED, run_steps

__all__ = ["PAGES"]


def _zucchet_steps(paper_steps, why):
    """A zucchet note for a trained quantity: the run's steps against the paper's, then ``why``."""
    def note(config, metrics):
        return f"this run trained {run_steps(config, metrics)} steps (the paper: {paper_steps}): {why}"
    return note


_TS_WHY = ("the loss and the scores keep falling by orders of magnitude with training, and pruning finds fewer "
           "neurons in use as they do, so a quick run stops far from Table 1's numbers.")
_ICL_WHY = ("the loss and the one-token polynomial settle slowly; a quick run stops above one GD step's loss, with "
            "coefficients that have not reached η*.")

# Table 1's quantities, in the order of notebook zucchet_d's Sec. 9 table
_TABLE1 = (("loss (MSE)", "loss"), ("relative loss", "relative_loss"), ("KV score", "kv_score"),
           ("Q score", "q_score"), ("polynomial distance", "poly_distance"),
           ("recurrent neurons removed", "hidden_removed"), ("output gates removed", "gates_removed"),
           ("key-value neurons kept", "n_kv"), ("query neurons kept", "n_q"), ("other neurons kept", "n_other"))


def _paper_optimiser_table(metrics):
    """Table 1 for the run of App. B.1's own optimiser (the committed
    ``data/zucchet/teacher_student_paper_optimiser_full.*``, whose sidecar keeps its analysis: written by
    ``python -m minimal.reproduce.extra zucchet/teacher_student_paper_optimiser_full``) beside this run and the
    paper's; no table when that file or its analysis is missing."""
    from ...data import data_path
    from ...run import io
    from ..zucchet.teacher_student import PAPER

    try:
        meta = io.load_meta(data_path("zucchet", "teacher_student_paper_optimiser_full.npz"))
    except (FileNotFoundError, ValueError):
        return []
    if not all(key in meta for _, key in _TABLE1):
        return []
    config, flushed = meta["config"], meta.get("subnormals_flushed_from_step")
    text = (f"App. B.1's optimiser (AdamW, lr {config['lr']:g} cosine-annealed to {config['final_lr']:g}, weight "
            f"decay {config['weight_decay']:g} throughout, no warm-up) for the paper's {config['steps']:,} steps, "
            "beside this run (Config(): lr 1.5e-2, weight decay 0.3 for its first 6,000 steps, then none) and "
            "Table 1. Pruning at 1e-3 of each matrix's largest entry, as for ours."
            + (f" From step {flushed:,} on, float32 subnormals were flushed to zero, the arithmetic of JAX on the "
               "CPU (the paper's framework), which left the earlier steps several times slower."
               if isinstance(flushed, int) and flushed > 0 else "")
            + " Notebook zucchet_d, Sec. 9.")
    rows = [[label, PAPER.get(key, "—"), metrics.get(key, "—"), meta[key]] for label, key in _TABLE1]
    return [{"title": "Table 1 with App. B.1's optimiser", "text": text,
             "header": ["quantity", "paper (Table 1)", "this run", f"App. B.1's optimiser, {config['steps']:,} steps"],
             "rows": rows}]


PAGES = {
    "zucchet.teacher_student": {
        "METRICS": {
            "kv_score_all": "the KV score on every λ ≈ 1 neuron of the unpruned network, not only those kept",
            "q_score_all": "the Q score on every λ ≈ 0 neuron of the unpruned network, not only those kept",
            "prune_tol": "a neuron's weights count as 0 below this fraction of its matrix's largest entry",
            "degree4_norm": "norm of the degree-4 part of the student's instantaneous polynomial (the teacher has none)",
            "n_other": "kept neurons that are neither key-value (λ ≈ 1) nor query (λ ≈ 0)",
            "pruned_relative_loss": "relative loss of the network after pruning",
            "*_functional": "the same count or loss after functional pruning (a neuron removed when removing it "
                            "leaves the loss unchanged)",
            "kv_dimensions": "rank of the kept key-value neurons' read-out (the teacher's: d(d+1)/2 = 10 for d = 4)",
            "q_dimensions": "rank of the kept query neurons' read-out",
            "kernel_kvq_fraction": "fraction of the merged kernel's norm in the key-value x query block",
            "final_train_loss": "training loss, mean over the last steps",
        },
        "LESSON": "zucchet_d_teacher_student.ipynb (Sec. 5-7)",
        "QUICK_UNREACHABLE": ("loss", "kv_score", "q_score", "poly_distance", "hidden_removed", "gates_removed",
                              "n_kv", "n_q"),
        "NOTES": {"*": _zucchet_steps("~781,000, App. B.1", _TS_WHY)},
        "PAGE_TABLES": lambda metrics: _paper_optimiser_table(metrics),
    },
    "zucchet.icl": {
        "METRICS": {
            "gap_rnn_minus_gd": "the RNN's loss minus one GD step's on the same fixed tasks",
            "gap_stderr": "standard error of that gap over the fixed tasks",
            "loss_gd_theory": "one GD step's expected loss at η*, in closed form (App. C.2)",
            "coef_max_rel_err": "largest relative distance of the three x_k² y_1 coefficients from η*",
            "lam_kv_mean": "mean λ of the key-value neurons (λ > 0.5)",
            "lag_fit_c": "gain c of the fit c λ^k to the gains on a context pair k steps back",
            "lag_fit_lam": "decay λ of that fit",
            "lag_fit_c_optimal": "the best gain for a memory of that decay (the lesson's Eq. (e))",
            "polynomial_fit_error": "least-squares residual of the one-token polynomial fit (exact: ~0)",
            "lam_fast_max": "largest λ of the query (fast, λ < 0.5) neurons",
            "lam_slow_min": "smallest λ of the key-value (slow) neurons",
            "n_slow_neurons": "neurons with λ > 0.5 (key-value memory)",
            "eta_star": "η* = 1 / (σ_x² (T + d_x - 1/5)) (App. C.2)",
            "coef_x2_y1": "coefficients of x_k² y_1 in ŷ_1 (Table 2's RNN column)",
        },
        "LESSON": {"residual_norm": "zucchet_e_in_context_regression.ipynb (Sec. 5)",
                   "*": "zucchet_e_in_context_regression.ipynb (Sec. 2 and 4)"},
        "CLOSED_FORM": ("eta_star", "loss_gd"),
        "QUICK_UNREACHABLE": ("final_train_loss", "coef_x2_y1", "coef_x2_y1_mean", "residual_norm"),
        "NOTES": {
            "eta_star": "App. C.2's formula 1 / (σ_x² (T + d_x - 1/5)) evaluated at T = 12, d_x = 3: nothing trained.",
            "loss_gd": f"one GD step at η*, {CLOSED}; it differs from the paper's by the sampling noise of a "
                       "finite evaluation set.",
            "residual_norm": _zucchet_steps(
                "300,000 at lr 1e-3, App. C.1",
                "the one-token input that defines Table 2's polynomial puts a label in the query's slot, which "
                "training never shows; the weights that read that slot stay untrained and carry the residual."),
            "*": _zucchet_steps("300,000 at lr 1e-3, App. C.1", _ICL_WHY),
        },
    },
    "zucchet.icl_seeds": {
        "METRICS": {"coef_predicted_from_lam": "the best gain c*(w) for each seed's mean key-value λ",
                    "gap_rnn_minus_gd": "the RNN's loss minus one GD step's on the same fixed tasks",
                    "lam_kv_mean": "mean λ of the key-value neurons (λ > 0.5)",
                    "loss_rnn": "query loss of the trained RNN on the fixed evaluation tasks",
                    "n_slow_neurons": "neurons with λ > 0.5 (key-value memory)",
                    "final_train_loss": "training loss, mean over the last steps",
                    "coef_x2_y1": "coefficients of x_k² y_1 in ŷ_1 (Table 2's RNN column)",
                    "residual_norm_label_zeroed_<stat>": "Table 2's residual norm after zeroing the fast "
                                                         "neurons' label-slot input weights (icl_seeds.label_slot_zeroed)",
                    "label_slot_share_min": "the smallest share of a seed's residual norm that zeroing the "
                                            "label-slot weights removes",
                    "label_zeroed_over_paper_<end>": "the residual left after zeroing them over the paper's "
                                                     "1.35e-3, smallest and largest over seeds",
                    "eta_star": "η* = 1 / (σ_x² (T + d_x - 1/5)) (App. C.2)",
                    "<metric>_std": "the sample standard deviation over the seeds (ddof = 1) of the metric"},
        "LESSON": {"residual_norm_mean": "zucchet_e_in_context_regression.ipynb (Sec. 4.1 and 5)",
                   "*": "zucchet_e_in_context_regression.ipynb (Sec. 4.1)"},
        "CLOSED_FORM": ("loss_gd",),
        "QUICK_UNREACHABLE": ("coef_x2_y1_mean", "coef_over_eta_star", "residual_norm_mean",
                              "final_train_loss_mean", "seeds"),
        "NOTES": {
            "seeds": lambda c, m: f"we train {len(c.get('seeds', ())) or '?'} seeds (the paper: 4).",
            "loss_gd": f"one GD step at η*, {CLOSED}; it differs from the paper's by the sampling noise of a "
                       "finite evaluation set.",
            "residual_norm_mean": lambda c, m: (
                "with the paper's optimiser the key-value memory stays leaky and the one-token input that defines "
                "Table 2's polynomial puts a label in the query's slot, which training never shows: the weights "
                "that read it stay untrained and carry the residual, while the loss matches one GD step's."
                + (f" Zeroing those weights (the fast neurons' label-slot inputs) removes "
                   f"{100 * m['label_slot_share_min']:.1f} % or more of each seed's residual; what remains is "
                   f"{m['label_zeroed_over_paper_min']:.1f} to {m['label_zeroed_over_paper_max']:.1f}x the paper's "
                   "1.35e-3." if "label_slot_share_min" in m else "")),
            "coef_*": "the paper's optimiser (AdamW on ν, where dλ/dν vanishes near λ = 1) leaves the key-value "
                      "neurons' λ slightly below 1: a leaky memory, whose best gain sits above η* (the lesson's "
                      "Eq. (e)), so the coefficients come out above η* and spread between seeds.",
            "*": _zucchet_steps("300,000 per seed, App. C.1", _ICL_WHY),
        },
    },
    "zucchet.hidden_size": {
        "METRICS": {
            "teacher_hiddens": "hidden sizes tried on the teacher-student task",
            "teacher_rel_loss": "relative loss reached at each size",
            "teacher_needed": "smallest size reaching the loss threshold",
            "construction_neurons_teacher": "neurons of the explicit construction, d(d+1)/2 + d",
            "icl_hiddens": "hidden sizes tried on in-context regression",
            "icl_rel_loss": "loss / one GD step's at each size",
            "icl_needed": "smallest size reaching one GD step's loss",
            "construction_neurons_icl": "neurons of the construction for tokens of size 7",
            "gd_neurons_icl": "neurons one GD step needs, d_x d_y + d_x",
            "icl_needed_over_construction": "icl_needed / construction_neurons_icl",
        },
        "LESSON": "zucchet_f_architectures.ipynb (Sec. 8)",
        "QUICK_UNREACHABLE": ("teacher_needed_over_construction",),
        "NOTES": {"*": "the smallest size that reaches the loss threshold depends on the grid of sizes tried and "
                       "on the threshold (quick 1e-2, full 1e-4); the paper reads \"around twice\" off Fig. 3A."},
    },
    "zucchet.architectures": {
        "LESSON": "zucchet_f_architectures.ipynb (Sec. 5-7)",
        "QUICK_UNREACHABLE": ("teacher_*", "icl_*"),
        "NOTES": {"*": "an ordering of Fig. 4: 1 when it holds in our grid, 0 when not; it depends on the sizes, "
                       "layer counts and steps of the grid, which are CPU-sized (the module's Config)."},
    },
}
