"""Page notes of the minimal-RNN experiments (Feng et al., ``minimal.experiments.minrnn``): the keys of
``minimal.experiments.notes`` for param_counts, runtime, peak_memory, shakespeare and selective_copy."""
from __future__ import annotations

__all__ = ["PAGES"]


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
    from ..minrnn.selective_copy import PAPER

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


def _seed_cells(r, key):
    """A selective-copying summary's seeds as three table cells: the accuracy of each seed, mean ± std (ddof = 0)
    and the step each stopped at (``selective_copy_summary.summarise``'s ``key`` entries, e.g. "mingru_1")."""
    return [" / ".join(f"{a:.2f}" for a in r[f"{key}_runs"]), f"{r[key]:.1f} ± {r[f'{key}_std']:.1f}",
            ", ".join(f"{s:,}" for s in r[f"{key}_steps_run"])]


def _trend_table(metrics):
    """Selective copying as T grows (``selective_copy_trend``: log-space minGRU, ``Config()`` with the length
    changed, from the committed job files) beside Table 1's T = 4096; a depth whose runs are not all on disk has
    no rows, and without any the table is left out."""
    from ..minrnn import selective_copy_trend as TR
    from ..minrnn.selective_copy import PAPER

    rows = []
    for depth in TR.DEPTHS:
        if not TR.finished(depth=depth):
            continue
        key = f"mingru_{depth}"
        for T, r in TR.summary(depths=(depth,)).items():
            rows.append([depth, T, *_seed_cells(r, key)])
        rows.append([depth, "4096 (Table 1)", "—", f"{PAPER[key]} ± {PAPER[f'{key}_std']}", "up to 400,000"])
    c = TR.config(TR.LENGTHS[0])
    text = (f"The log-space minGRU (the form the paper trains) at longer sequences: Config() ({c.n_data} data tokens, "
            f"width D = {c.D}, trained until no learning rate helps, cap {c.steps:,} steps) with only T changed, "
            f"{len(c.seeds)} seeds each; "
            "± is the population standard deviation of the seeds (ddof = 0). Noise tokens per data token: about "
            "255 in the paper (App. C.3: 16 data tokens among 4096), "
            + ", ".join(f"{(T - 2 * n) // n} at T = {T}" for T, n in ((T, TR.config(T).n_data) for T in TR.LENGTHS))
            + " here (T counts the 16 markers at the end); the paper's width is 64 (App. C.2). "
            "Notebook minrnn_c_selective_copy, Sec. 4.4.")
    return [{"title": "Selective copying as T grows (log-space minGRU)", "text": text,
             "header": ["layers", "T", "accuracy per seed (%)", "mean ± std (%)", "stopped at (steps)"],
             "rows": rows}]


def _width_table(metrics):
    """Selective copying at the paper's width D = 64 (``selective_copy_trend`` with ``D=64``, T = 64) beside the same
    runs at our D = 32 and Table 1; a depth whose D = 64 runs are not all on disk has no rows, and without any the
    table is left out."""
    from ..minrnn import selective_copy_trend as TR
    from ..minrnn.selective_copy import PAPER

    rows = []
    for depth in TR.DEPTHS:
        if not TR.finished(depth=depth, D=64):
            continue
        key = f"mingru_{depth}"
        for D in TR.WIDTHS:
            for T in TR.lengths(depth, D=64):
                r = TR.summary(depths=(depth,), D=D)[T]
                rows.append([depth, D, T, *_seed_cells(r, key)])
        rows.append([depth, "64 (App. C.2)", "4096 (Table 1)", "—", f"{PAPER[key]} ± {PAPER[f'{key}_std']}",
                     "up to 400,000"])
    if not rows:
        return []
    from ..minrnn.selective_copy import Job

    c, e = TR.config(64, D=64), Job.expansion
    text = (f"The log-space minGRU at the paper's width D = 64 (expansion factor {e}, so H = {e * 64}) and at ours, "
            f"D = 32 (H = {e * 32}), both at T = 64 with every other setting of "
            f"Config() ({c.n_data} data tokens, trained until no learning rate helps, cap {c.steps:,} steps), "
            f"{len(c.seeds)} seeds each; ± is the population standard deviation of the seeds (ddof = 0). "
            "Notebook minrnn_c_selective_copy, Sec. 4.4.")
    return [{"title": "Selective copying at the paper's width (log-space minGRU, T = 64)", "text": text,
             "header": ["layers", "D", "T", "accuracy per seed (%)", "mean ± std (%)", "stopped at (steps)"],
             "rows": rows}]


_LM_NAMES = {"mingru": "minGRU (log space)", "minlstm": "minLSTM (log space)", "mingru_vanilla": "minGRU (vanilla)",
             "attention": "Transformer"}


def _lm_seeds_table(metrics):
    """The Shakespeare runs of ``Config()`` over their committed seeds (``shakespeare_runs.seed_curves``,
    ``shakespeare_summary.across_seeds``): per model, the best test-subset loss of each seed with mean ± std
    (ddof = 0), its ratio to the Transformer's, and the two step ratios (the Transformer's steps to its best over
    the model's first step at that loss, the paper's 2000 / 575; and over the model's steps to its own best). The
    page's rows above are seed 0's; without all three seeds on disk the table is left out."""
    from ..minrnn import shakespeare_runs as R
    from ..minrnn.shakespeare import PAPER
    from ..minrnn.shakespeare_summary import across_seeds

    runs = R.seed_curves()
    if len(runs) < 3:
        return []
    a = across_seeds(runs)

    def cell(key, fmt):
        if f"{key}_seeds" not in a:
            return "—"
        return (" / ".join(format(v, fmt) for v in a[f"{key}_seeds"]) +
                f" (mean {a[key]:{fmt}} ± {a[f'{key}_std']:{fmt}})")

    rows = []
    for kind in ("mingru", "minlstm", "mingru_vanilla", "attention"):
        if f"test_loss_{kind}_seeds" not in a:
            continue
        rows.append([_LM_NAMES.get(kind, kind), cell(f"test_loss_{kind}", ".3f"),
                     cell(f"ratio_{kind}_to_transformer", ".3f"),
                     cell(f"steps_ratio_attention_to_{kind}_at_transformer_best", ".2f"),
                     cell(f"steps_ratio_attention_to_{kind}", ".2f")])
    c = runs[0].get("config", {})
    text = (f"Config() (D = {c.get('D', '?')}, context {c.get('T', '?')}, batch {c.get('batch', '?')}, each model "
            f"{_lm_budget(c)}), seeds {', '.join(str(s) for s in a['seeds'])}, per seed and mean ± std (ddof = 0); "
            "the rows above are seed 0's. Best test loss: the lowest loss on the fixed test subset. The paper "
            f"(D = 384, batch 64): minGRU {PAPER['test_loss_mingru']}, minLSTM {PAPER['test_loss_minlstm']}, "
            f"Transformer {PAPER['test_loss_attention']}; its Transformer takes 2000 / 575 = "
            f"{PAPER['steps_ratio_attention_to_mingru_at_transformer_best']:.2f} times minGRU's steps. "
            "Notebook minrnn_d_shakespeare.")
    return [{"title": "Shakespeare over three seeds", "text": text,
             "header": ["model", "best test loss per seed", "/ Transformer's", "Transformer's steps to its best / "
                        "the model's to reach that loss", "Transformer's steps to its best / the model's to its own"],
             "rows": rows}]


def _log_space_speed(metrics):
    """The log-space rows of the runtime page: the range of their speed-ups, and which side of 1 it lies on."""
    values = [v for k, v in metrics.items() if k.startswith("speedup_") and "_log_T" in k
              and isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return "The log-space form, the one the paper trains (App. B.3), was not timed in this run."
    lo, hi = min(values), max(values)
    side = ("slower than the GRU / LSTM on every row" if hi < 1 else "faster than the GRU / LSTM on every row"
            if lo > 1 else "slower than the GRU / LSTM on some rows and faster on others")
    return (f"In log space, the form the paper trains (App. B.3), the minimal cells are {side} on one CPU core: "
            f"speed-ups {lo:.2f} to {hi:.2f} across T.")


def _lm_budget(config):
    """How a Shakespeare run was trained: until its best test loss stopped improving (with a cap), or a fixed count."""
    steps = config.get("steps", "?")
    steps = f"{steps:,}" if isinstance(steps, int) else steps
    if config.get("patience"):
        return (f"trained until its best test loss stopped improving (the learning rate multiplied by "
                f"{config.get('factor', '?')} at each {config['patience']}-step plateau, stopped at the plateau after "
                f"the last cut; cap {steps} steps)")
    return f"{steps} steps"


PAGES = {
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
                                      "as the GRU's loop: the speed-up is a constant factor, not one growing with T. "
                                      + _log_space_speed(m),
            "mem_ratio_*": "we count the arrays our hand-written backward keeps; the paper measures PyTorch's "
                           "autograd peak, which also keeps every intermediate of the scan (the peak of our step is "
                           "the peak_memory experiment's row).",
        },
        "METRICS": {"T": "the sequence lengths timed",
                    "speedup_<cell>_T<T>": "time per training step of GRU (LSTM) / minGRU (minLSTM) at length T",
                    "mem_ratio_<cell>_<baseline>": "bytes kept for the backward pass, minimal / traditional cell",
                    "ms_<cell>_T<T>": "time per training step (forward, loss, backward) at length T, ms, the "
                                      "fastest of the run's repeats"},
        "QUICK_MISSES": "sequence lengths up to 512 only: the paper's T = 4096 speed-ups have no row.",
    },
    "minrnn.peak_memory": {
        "LESSON": "minrnn_b_runtime.ipynb (Sec. 4)",
        "NOTES": {
            "peak_ratio_*": lambda c, m: (
                "the peak memory of one training step (forward, loss, backward) above its inputs, each model in a "
                "fresh process, on one CPU core with our hand-written backward; the paper's ~1.88 is PyTorch's "
                "autograd peak on a T4 GPU, which keeps every intermediate to the end of the backward. Beside it, "
                "the bytes our backward keeps (runtime's definition) at the same T: " + ", ".join(
                    f"{k[len('cache_ratio_'):]} {m[k]:.2f}" for k in sorted(m) if k.startswith("cache_ratio_"))
                + "."),
        },
        "METRICS": {"T": "the sequence lengths measured",
                    "peak_ratio_<cell>_<baseline>": "peak memory of one training step above its inputs, minimal / "
                                                    "traditional cell, at the largest T",
                    "cache_ratio_<cell>_<baseline>": "bytes kept for the backward pass, minimal / traditional "
                                                     "cell, at the largest T (runtime's definition)",
                    "peak_mib_<cell>_T<T>": "peak memory of one training step above its inputs at length T, MiB"},
        "QUICK_MISSES": "sequence lengths up to 512 only.",
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
        "PAGE_TABLES": lambda metrics: _lm_seeds_table(metrics),
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
        "PAGE_TABLES": lambda metrics: _trend_table(metrics) + _width_table(metrics),
    },
}
