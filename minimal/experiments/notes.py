"""What each results page says beyond the numbers (``minimal.run.report``): per experiment, the notes that explain
its verdicts, the rows a quick run cannot reach, which side of the paper is better, its metric definitions and
what a quick run misses.

``page(work, name)`` returns a dict with any of these keys; an experiment module that defines the attribute of
the same name takes precedence, so a module can carry its own page data:

    NOTES              key or fnmatch pattern -> a sentence, or a function (config, metrics) -> sentence, where
                       config is the run's configuration as a dict (``metrics["config"]``, else the module's
                       ``Config`` of the run's mode) and metrics the run's metrics
    QUICK_UNREACHABLE  key patterns a quick run is not expected to reach (its verdict reads so, not "differs")
    BETTER             key pattern -> "lower" or "higher": the side of the paper's number that is better; only
                       where the row's note says what made a number better (its task, not a better model)
    METRICS            key (or pattern; "<name>" stands for any text) -> definition
    QUICK_MISSES       one paragraph: what a quick run is expected to miss
    LESSON             the notebook (and its sections) that shows why a row comes out as it does: a string, or
                       {key pattern: string}; the page names it after every non-matching row's note
    CLOSED_FORM        key patterns computed in closed form (nothing trained): their notes name no step count

The sentences state settings, read from the configuration, and the reasons the modules' docstrings and the lessons
give, in one or two sentences; they state no measured number, so they stay true when a run's numbers move. Every
metric with a paper value has a note (tests/test_report.py), since any row may come out not matching.
"""
from __future__ import annotations

__all__ = ["page", "pages", "PAGES"]


def _gril_scale(config, metrics):
    from .gril import model as M

    job = M.Job()
    a, f = float(config.get("x_scale", job.x_scale)), int(config.get("f", job.f))
    return (f"raw losses depend on the input scale x ~ U(-a, a), a = {a:g} here (`model.Job.x_scale`): our zero "
            f"predictor's loss is f a²/6 = {f * a * a / 6:.3g} for f = {f}, the paper's 0.414-0.426 with no stated "
            "normalisation, so the ratios to the zero predictor and to one GD step are the scale-free comparisons.")


def _ridge_note(config, metrics):
    """The unit-ridge row's note: at x ~ U(-1, 1) its ratio to GD fits Table 7's Newton row, its loss does not."""
    ratio, loss = metrics.get("ridge_over_gd_at_a1"), metrics.get("ridge_loss_at_a1")
    ours = (f" (ours {ratio:.3f}; its loss there is {loss:.2f}, {loss / 0.114:.1f} times 0.114)"
            if isinstance(ratio, float) and isinstance(loss, float) else " (`ridge_over_gd_at_a1`)")
    return ("a closed form: one unit-ridge step, a reading of Table 7's Newton row whose ratio to one GD step fits "
            f"the paper's 0.114 / 0.207 = 0.551 at x ~ U(-1, 1){ours}, where the zero predictor's and GD's losses "
            "are four times those at U(-1/2, 1/2): the ratio fits, the absolute loss does not. At the paper's input "
            "scale U(-1/2, 1/2), where this row is computed, the same step scores close to GD's, so it differs.")


def _steps(config, metrics):
    steps = config.get("steps", "?")
    return f"{steps:,}" if isinstance(steps, int) else steps


def _zucchet_steps(paper_steps, why):
    """A zucchet note for a trained quantity: the run's steps against the paper's, then ``why``."""
    def note(config, metrics):
        return f"this run trained {_steps(config, metrics)} steps (the paper: {paper_steps}): {why}"
    return note


def _sc_budget(config):
    """How a selective-copying run was trained: until its accuracy stopped rising, with a cap, or a fixed count."""
    steps = config.get("steps", "?")
    steps = f"{steps:,}" if isinstance(steps, int) else steps
    if config.get("patience") and config.get("reductions") is not None:
        return (f"until its accuracy stopped rising at every learning rate (the rate multiplied by "
                f"{config.get('factor', '?')} at each of the first {config['reductions']} plateaus of "
                f"{config['patience']:,} steps and stopped at the next one, with a cap of {steps} steps; the paper: "
                "up to 400,000)")
    if config.get("patience"):
        return f"until its accuracy stopped rising or the cap of {steps} steps (the paper: up to 400,000)"
    return f"{steps} steps (the paper: up to 400,000)"


def _sc_setup(config):
    """A selective-copying run's task and width against the paper's (App. C.2-C.3)."""
    return (f"T = {config.get('T', '?')} with {config.get('n_data', '?')} data tokens at width D = "
            f"{config.get('D', '?')} (the paper: T = 4096 with 16, far more noise between the data tokens, input "
            "dimension 64)")


def _sc_side(key, metrics):
    """Which side of Table 1 row ``key``'s accuracy lies on, and what that does not show; a sentence true on
    either side where the row's number is not at hand (a pattern, or metrics without it)."""
    from .minrnn.selective_copy import PAPER

    ours, paper = metrics.get(key), PAPER.get(key)
    if isinstance(ours, (int, float)) and not isinstance(ours, bool) and paper is not None and ours != paper:
        return ("This accuracy is above the paper's, which does not show a better model" if ours > paper else
                "This accuracy is below the paper's, which does not show a worse model")
    return "An accuracy above the paper's does not show a better model, nor one below it a worse one"


def _sc_note(key):
    """The note of a two- or three-layer selective-copying row ``key`` (an exact key, or a pattern)."""
    def note(config, metrics):
        vanilla = key.endswith("_vanilla")
        cells = "the vanilla cells (the paper trains the log-space form, App. B.3), " if vanilla else ""
        return (f"{cells}{_sc_setup(config)}, trained {_sc_budget(config)}; judged as an accuracy and as an error "
                f"rate, 100 − accuracy. {_sc_side(key, metrics)}: the shorter sequences, the narrower model and "
                "the shorter training all differ, unmeasured apart.")
    return note


def _lm_budget(config):
    """How a Shakespeare run was trained: until its best test loss stopped improving (with a cap), or a fixed count."""
    steps = config.get("steps", "?")
    steps = f"{steps:,}" if isinstance(steps, int) else steps
    if config.get("patience"):
        return (f"trained until its best test loss stopped improving (the learning rate multiplied by "
                f"{config.get('factor', '?')} at each {config['patience']}-step plateau, stopped at the plateau after "
                f"the last cut; cap {steps} steps)")
    return f"{steps} steps"


_TS_WHY = ("the loss and the scores keep falling by orders of magnitude with training, and pruning finds fewer "
           "neurons in use as they do, so a quick run stops far from Table 1's numbers.")
_ICL_WHY = ("the loss and the one-token polynomial settle slowly; a quick run stops above one GD step's loss, with "
            "coefficients that have not reached η*.")
_CLOSED = "a closed form evaluated on our fixed evaluation tasks, nothing trained"

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
            "loss_gd": f"one GD step at η*, {_CLOSED}; it differs from the paper's by the sampling noise of a "
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
                    "eta_star": "η* = 1 / (σ_x² (T + d_x - 1/5)) (App. C.2)"},
        "LESSON": {"residual_norm_mean": "zucchet_e_in_context_regression.ipynb (Sec. 4.1 and 5)",
                   "*": "zucchet_e_in_context_regression.ipynb (Sec. 4.1)"},
        "CLOSED_FORM": ("loss_gd",),
        "QUICK_UNREACHABLE": ("coef_x2_y1_mean", "coef_over_eta_star", "residual_norm_mean",
                              "final_train_loss_mean", "seeds"),
        "NOTES": {
            "seeds": lambda c, m: f"we train {len(c.get('seeds', ())) or '?'} seeds (the paper: 4).",
            "loss_gd": f"one GD step at η*, {_CLOSED}; it differs from the paper's by the sampling noise of a "
                       "finite evaluation set.",
            "residual_norm_mean": "with the paper's optimiser the key-value memory stays leaky and the one-token "
                                  "input that defines Table 2's polynomial puts a label in the query's slot, which "
                                  "training never shows: the weights that read it stay untrained and carry the "
                                  "residual, while the loss matches one GD step's.",
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
    "gril.regression": {
        "LESSON": {"newton_*": "gril_c_trained_vs_gd.ipynb (Sec. 7)", "ridge_*": "gril_c_trained_vs_gd.ipynb (Sec. 7)",
                   "*": "gril_c_trained_vs_gd.ipynb (Sec. 2-4)"},
        "CLOSED_FORM": ("loss_gd", "construction_loss", "construction_over_gd", "newton_*", "ridge_*", "loss_zero",
                        "scalar_loss_zero", "gd_over_zero"),
        "METRICS": {"gril_over_gd": "trained GRIL's query loss / one GD step's (η*) on 10^4 fixed tasks",
                    "construction_over_gd": "the GD construction's loss / one GD step's (exact: 1)",
                    "newton_over_gd": "one undamped Newton step's loss / one GD step's",
                    "gd_over_zero": "one GD step's loss / the zero predictor's",
                    "pred_cos": "cosine similarity of GRIL's and GD's predictions (App. B.1)",
                    "pred_l2": "L2 distance between GRIL's and GD's predictions (App. B.1)",
                    "pred_l2_over_norm": "that distance / the norm of GD's predictions",
                    "sens_cos": "cosine similarity of GRIL's and GD's input sensitivities ∂ŷ/∂x_q (App. B.1)",
                    "sens_l2": "L2 distance between those sensitivities",
                    "scalar_*": "the same for the scalar task (n_o = 1, Table 5)",
                    "*_at_a1": "the same at the input scale x ~ U(-1, 1)",
                    "construction_vs_gd_max_abs": "largest |difference| of the construction's and GD's predictions",
                    "ridge_over_gd": "one unit-ridge step's loss / one GD step's",
                    "n_eval": "evaluation tasks"},
        "NOTES": {
            "newton_*": "with N = f noiseless examples one undamped Newton step solves the least-squares problem "
                        "exactly (loss ~0), a closed form; the paper names no damping, and a damped step spans "
                        "every value between 0 and GD's: the paper's 0.114 is not derivable from its text.",
            "ridge_loss": _ridge_note,
            "ridge_over_gd_at_a1": "a closed form: one unit-ridge step over one GD step at x ~ U(-1, 1), the input "
                                   "scale at which this ratio fits Table 7's Newton row (the loss there does not: "
                                   "`ridge_loss_at_a1`).",
            "gd_over_zero": _gril_scale, "scalar_gril_over_zero": _gril_scale, "loss_zero": _gril_scale,
            "scalar_loss_zero": _gril_scale,
            "loss_gd": f"one GD step at η*, {_CLOSED}: our own draw of 10^4 tasks, whose loss may sit a unit or two "
                       "off the paper's last printed digit, the spread the paper gives itself (± 0.001).",
            "construction*": f"the GRIL block at Prop. 4.1's weights, {_CLOSED}: it equals one GD step's loss to "
                             "rounding, so it stands where that loss does against the paper's digits.",
            "*": lambda c, m: f"trained {_steps(c, m)} steps (the paper: up to 300,000 at lr 1e-4); the loss "
                              "sits at one GD step's from early on, on our own draw of 10^4 evaluation tasks, and a "
                              "unit or two off the paper's last printed digit is the spread the paper gives itself "
                              "(± 0.001-0.002).",
        },
        "QUICK_MISSES": "nothing stated: the quick run trains fewer steps per model (`Config.quick`) and is judged "
                        "like the full one.",
    },
    "gril.ablations": {
        "LESSON": "gril_c_trained_vs_gd.ipynb (Sec. 8)",
        "METRICS": {"<target>_<variant>": "query loss 1/2 mean (ŷ - y)² on 10^4 fixed tasks, mean ± std over seeds",
                    "<target>_<variant>_over_full": "the ablated variant's loss / the full GRIL's (the claim: ~2)"},
        "NOTES": {"*_over_full": "the claim is this ratio, about 2: removing either component leaves the model at "
                                 "the zero predictor.",
                  "*": _gril_scale},
        "QUICK_MISSES": "nothing stated: two seeds and fewer steps at a higher rate (`Config.quick`), judged like "
                        "the full run.",
    },
    "gril.comparison": {
        "METRICS": {"<target>_<model>": "query loss of the model (1/2 MSE per output on 10^4 fixed tasks), mean "
                                        "over seeds",
                    "<target>_gd": "one GD step's loss (η*) on the same tasks",
                    "<target>_zero": "the zero predictor's loss on the same tasks"},
        "LESSON": "gril_d_beyond_one_step.ipynb (Sec. 3)",
        "QUICK_UNREACHABLE": ("*_gated_rnn_*", "*_lru_*", "*_mingru_*"),
        "NOTES": {"*_gril_*": _gril_scale, "*_loss": _gril_scale,
                  "*_at_zero_predictor": "Table 3's baselines (no linear projection) and our stand-ins both sit at "
                  "the zero predictor: a row that agrees says that neither learns, not that their skills match.",
                  "*_closest_non_recurrent": "the attention models' mean losses over their seeds, trained as the "
                  "module's Config says; the paper's transformer is its own model at its own size.",
                  "*": "our stand-ins are CPU-sized (d_model, hidden and layers in the module's Config) and trained "
                       "as its Config says; the paper's S5, Mamba and Griffin are their own models at larger "
                       "sizes, so their losses need not land where the paper's do."},
        "QUICK_MISSES": "600 steps for the stand-ins (GRIL 1,500): far from converged, it shows GRIL at one GD step "
                        "and where the other models start, not where they end.",
    },
    "gril.multistep": {
        "METRICS": {"eta_best_1_step_searched": "the best fixed η for one GD step, searched on the tasks",
                    "eta_best_2_steps": "the best fixed η for two GD steps (`best_eta`)",
                    "eta_free_steps_2": "the best size of each of two GD steps (`best_step_sizes`)",
                    "loss_gd2_at_eta_star": "two GD steps at one step's η*",
                    "sine_eta_best_1_step": "the best η for one linear GD step on the sine tasks",
                    "sine_loss_linear_gd1": "one linear GD step at η* on the sine tasks",
                    "sine_loss_linear_gd1_best_eta": "one linear GD step at the best η on the sine tasks",
                    "sine_loss_zero": "the zero predictor on the sine tasks"},
        "LESSON": "gril_d_beyond_one_step.ipynb (Sec. 1-2)",
        "CLOSED_FORM": ("loss_gd1", "loss_zero"),
        "NOTES": {"loss_gd1": f"one GD step at η*, {_CLOSED}: Table 7's tasks (N = f = n_o = 10, x ~ U(-1/2, 1/2)) "
                              "on our own draw of 10^4 tasks, a unit or two off the paper's last printed digit, the "
                              "spread the paper gives itself (± 0.001).",
                  "loss_zero": "the zero predictor on our own draw of 10^4 evaluation tasks, a closed form; it "
                               "differs from its expectation f a^2/6 = 0.417 (and the paper's 0.414) by sampling "
                               "noise.",
                  "loss_gril1": lambda c, m: f"trained {_steps(c, m)} steps on Table 7's tasks, at one GD step's "
                                             "loss; ours are on our own draw of 10^4 evaluation tasks, a unit or two "
                                             "off the paper's last printed digit, the spread the paper gives itself "
                                             "(± 0.001).",
                  "gril2_over_gd2": "the two GD steps here share one fixed η, while the trained layers learn a "
                                    "step size each: the two-layer model beats fixed-η GD and matches GD with the "
                                    "best size per step (`gril2_over_gd2_free_steps`). The paper's 1.0 encodes "
                                    "\"tracks two GD steps\" (Fig. 3A, a curve).",
                  "sine_gril_over_gd_mlp": lambda c, m: "the paper claims the fully trained GRIL + MLP does at "
                                                        "least as well as GD + MLP (Fig. 3B, a curve); in our "
                                                        f"{_steps(c, m)}-step runs it ends level with one linear GD "
                                                        "step while GD + MLP learns a little below it.",
                  "*": lambda c, m: f"trained {_steps(c, m)} steps per linear model; the paper gives Fig. 3 as "
                                    "curves, and 1.0 / True encode its claims, not measured values."},
        "QUICK_MISSES": "nothing stated: fewer steps per model (`Config.quick`), judged like the full run.",
    },
    "gril.classification": {
        "METRICS": {"<task>_acc": "query accuracy of GRIL (φ) on the fixed evaluation tasks",
                    "<task>_acc_gd": "query accuracy of one GD step (tuned η)",
                    "<task>_agree": "fraction of queries where GRIL and GD predict the same class",
                    "<task>_nophi_*": "the same for GRIL without φ",
                    "<task>_pred_l2": "L2 distance of GRIL's and GD's predicted probabilities",
                    "<task>_eta_gd": "the tuned step size of one GD step",
                    "<task>_eta_gd_phi": "the tuned step size of one GD step on φ(x)",
                    "<task>_loss_gd_phi": "one GD step's loss on φ(x)",
                    "<task>_gd_phi_over_gd": "one GD step on φ(x) / on x",
                    "<task>_construction_vs_gd_max_abs": "largest |difference| of the construction's and GD's "
                                                         "predictions (exact: ~0)",
                    "<task>_centred_construction_vs_gd_max_abs": "the same for centred labels",
                    "<task>_construction_offset_max_abs": "largest |offset| of the construction from GD "
                                                          "(uncentred labels)",
                    "<task>_construction_over_gd": "the construction's loss / one GD step's"},
        "LESSON": "gril_d_beyond_one_step.ipynb (Sec. 4)",
        "NOTES": {"binary_*": "on the binary task, with our φ and run lengths, GRIL's loss stays a little above one "
                              "GD step's and its sensitivities follow GD's less closely than on the softmax task. The "
                              "paper gives figures, not numbers: 1.0 encodes \"GRIL tracks GD\".",
                  "*": "the paper gives figures, not numbers: 1.0 encodes \"GRIL tracks GD\" (loss ratio, "
                       "sensitivity cosine); our φ and the length of our runs are our own."},
        "QUICK_MISSES": "nothing stated: fewer steps per model (`Config.quick`), judged like the full run.",
    },
    "minrnn.param_counts": {
        "LESSON": "minrnn_a_from_gru_to_mingru.ipynb (Sec. 5)",
        "CLOSED_FORM": ("*",),
        "NOTES": {"*": "a count of the weights; the paper prints whole percent."},
        "METRICS": {"<cell>_pct_alpha<α>": "parameters of minGRU / minLSTM as % of GRU / LSTM at d_h = α d_x, "
                                           "without biases (Sec. 3.1.3, 3.2.4)",
                    "<cell>_pct_bias_alpha<α>": "the same with biases",
                    "<cell>_params_alpha<α>": "weights of the cell at d_h = α d_x (no biases)",
                    "<cell>_params_bias_alpha<α>": "weights and biases of the cell at d_h = α d_x"},
        "QUICK_MISSES": "nothing: a count, the same in both modes.",
    },
    "minrnn.runtime": {
        "LESSON": "minrnn_b_runtime.ipynb (Sec. 2-3)",
        "NOTES": {
            "speedup_*": lambda c, m: "Fig. 1 times a T4 GPU, where the parallel scan has O(log T) depth; we time "
                                      f"one CPU core (batch {c.get('batch', '?')}, D = {c.get('d_in', '?')}, "
                                      f"H = {c.get('d_hidden', '?')}), where the scan does the same linear work "
                                      "as the GRU's loop: the speed-up is a constant factor, not one growing with T.",
            "mem_ratio_*": "we count the arrays our hand-written backward keeps; the paper measures PyTorch's "
                           "autograd peak, which also keeps every intermediate of the scan.",
        },
        "METRICS": {"T": "the sequence lengths timed",
                    "speedup_<cell>_T<T>": "time per training step of GRU (LSTM) / minGRU (minLSTM) at length T",
                    "mem_ratio_<cell>_<baseline>": "bytes kept for the backward pass, minimal / traditional cell",
                    "ms_<cell>_T<T>": "time per training step (forward, loss, backward) at length T, ms, the "
                                      "fastest of the run's repeats"},
        "QUICK_MISSES": "sequence lengths up to 512 only: the paper's T = 4096 speed-ups have no row.",
    },
    "minrnn.shakespeare": {
        "LESSON": "minrnn_d_shakespeare.ipynb (Sec. 3-4)",
        "QUICK_UNREACHABLE": ("test_loss_*", "steps_to_best_*", "ratio_*", "steps_ratio_*"),
        "NOTES": {
            "test_loss_*": lambda c, m: f"our model is D = {c.get('D', '?')} wide with context {c.get('T', '?')}, "
                                        f"batch {c.get('batch', '?')}, {_lm_budget(c)}; the paper's is D = 384, "
                                        "batch 64, 5,000 steps: a smaller model that sees fewer characters has a "
                                        "higher loss.",
            "steps_to_best_*": lambda c, m: (f"the step of the best test loss is bounded by the run's length, "
                                             f"{c.get('steps', '?')} steps of batch {c.get('batch', '?')} evaluated "
                                             f"every {c.get('eval_every', '?')} (the paper: 5,000 steps of batch 64, "
                                             "every 25)." if c.get("patience") is None else
                                             f"{_lm_budget(c)}, evaluated every {c.get('eval_every', '?')}; a step "
                                             f"here is a batch of {c.get('batch', '?')} windows (the paper: 64, "
                                             "5,000 steps, every 25, its models past their best before the end)."),
            "steps_ratio_*_at_transformer_best": lambda c, m: (
                "the Transformer's steps to its best over the step where the minimal RNN's test-subset loss first "
                f"reaches that best, seed {c.get('seed', '?')} (the lesson has three seeds), each model "
                f"{_lm_budget(c)}; steps of batch {c.get('batch', '?')} at D = {c.get('D', '?')} (the paper: batch "
                "64 at D = 384)."),
            "steps_ratio_*": lambda c, m: (f"both models' steps to their best loss are capped by the run's length, "
                                           f"{c.get('steps', '?')} steps of batch {c.get('batch', '?')} (the paper: "
                                           "5,000 of batch 64), so their ratio is near 1 where the paper's "
                                           "Transformer needs about 3.5 times minGRU's steps."
                                           if c.get("patience") is None else
                                           f"each model {_lm_budget(c)}, in steps of batch {c.get('batch', '?')} "
                                           "(the paper: 64): the ratio compares where each stopped improving at "
                                           f"D = {c.get('D', '?')}, not a best passed by over-fitting as in the "
                                           "paper."),
            "ratio_*": lambda c, m: f"minimal RNN / Transformer at D = {c.get('D', '?')}, {_lm_budget(c)}, seed "
                                    f"{c.get('seed', '?')} (the lesson has three seeds); the paper's ratio is at "
                                    "D = 384 with its own Transformer (6 heads, learned positions), trained to its "
                                    "best.",
        },
        "METRICS": {"test_loss_<model>": "cross-entropy (nats per character) at the run's best evaluation: the "
                                         "lowest of the losses on the fixed test subset (`n_eval_targets` "
                                         "characters), evaluated every `eval_every` steps, as the paper reports "
                                         "its best; not the final model, not every test window "
                                         "(`final_test_loss_<model>`)",
                    "steps_to_best_<model>": "the evaluation step of that lowest loss on the fixed test subset",
                    "ratio_<model>_to_transformer": "test_loss of the minimal RNN / the same-size Transformer's",
                    "final_test_loss_<model>": "cross-entropy of the scored model on every test window "
                                               "(`n_test_targets` characters): the best evaluated weights when the "
                                               "run stops by the plateau rule, the last ones in a fixed-length run",
                    "final_ratio_<model>_to_transformer": "the same ratio of final_test_loss (every test window)",
                    "steps_ratio_attention_to_<model>_at_transformer_best": "the Transformer's steps to its best "
                                                                            "loss / the model's first evaluation "
                                                                            "step at or below that loss (the "
                                                                            "paper's \"to achieve comparable "
                                                                            "performance\")",
                    "steps_ratio_attention_to_<model>": "the Transformer's steps to its best loss / the model's to "
                                                        "its own",
                    "steps_to_transformer_best_<model>": "the model's first evaluation step at or below the "
                                                         "Transformer's best loss (the fixed test subset)",
                    "n_eval_targets": "characters in the fixed test subset evaluated during training",
                    "n_test_targets": "characters in every test window", "T": "context length (characters)",
                    "n_heads": "attention heads of the Transformer", "vocab": "the characters of the vocabulary"},
        "QUICK_MISSES": "D = 48, context 64, 300 steps against the full run's D = 64 (the paper's 384): the losses "
                        "are far above the paper's and the step of the best loss is capped by the run's length.",
    },
    "minrnn.selective_copy": {
        "LESSON": "minrnn_c_selective_copy.ipynb (Sec. 2-4)",
        "METRICS": {"<cell>_<layers>_steps_run": "per seed, the step where training stopped (the stopping rule or "
                                                 "the cap)",
                    "<cell>_<layers>_steps_to_best": "per seed, the step of the best evaluation (the weights scored)",
                    "<cell>_<layers>_runs": "per seed, the token accuracy (%)",
                    "<cell>_<layers>": "token accuracy (%) at the marker positions on fixed evaluation sequences, "
                                       "mean ± std over seeds (Table 1); our ± is the population standard "
                                       "deviation of the seeds' accuracies (NumPy's std, ddof = 0), the paper "
                                       "does not say which it prints"},
        "BETTER": {"*_2": "higher", "*_3": "higher", "*_2_vanilla": "higher", "*_3_vanilla": "higher"},
        "QUICK_UNREACHABLE": ("mingru_*", "minlstm_*"),
        "NOTES": {
            "*_1_vanilla": lambda c, m: "the vanilla cells (h̃ = Linear_h(x); the paper trains the log-space form, "
                                        f"App. B.3), {_sc_setup(c)}, trained {_sc_budget(c)}: one layer's accuracy "
                                        "depends on the sequence length and the training. The claim is the gap "
                                        "between one layer and two.",
            **{key: _sc_note(key) for cell in ("mingru", "minlstm") for layers in (2, 3)
               for key in (f"{cell}_{layers}", f"{cell}_{layers}_vanilla")},
            "*_vanilla": _sc_note("*_vanilla"),
            "*_1": lambda c, m: f"{_sc_setup(c)}, trained {_sc_budget(c)}: one layer's accuracy depends on the "
                                "sequence length and the training. The claim is the gap between one layer and two.",
            "*": _sc_note("*"),
        },
    },
}


def page(work, name):
    """The page data of experiment ``name`` of ``work`` (module docstring); {} when there is none."""
    return PAGES.get(f"{work}.{name}", {})


def pages(work, names):
    """``{name: page(work, name)}`` for the experiments ``names`` of ``work``: what ``minimal.run.report`` takes."""
    return {name: page(work, name) for name in names}
