"""Parameter counts: minGRU vs GRU and minLSTM vs LSTM (Feng et al., "Were RNNs All We Needed?", Sec. 3.1.3
and Sec. 3.2.4).

The paper counts O(2 d_h d_x) parameters for minGRU against O(3 d_h (d_x + d_h)) for a GRU (Sec. 2.2, 3.1.3), and
O(3 d_h d_x) for minLSTM against O(4 d_h (d_x + d_h)) for an LSTM (Sec. 2.1, 3.2.4), with state expansion
d_h = α d_x. Those are the weight matrices only; their ratios do not depend on d_x:

    minGRU / GRU    = 2 d_h d_x / (3 d_h (d_x + d_h)) = 2 / (3 (1 + α))   -> 33.3, 22.2, 16.7, 13.3 %
    minLSTM / LSTM  = 3 d_h d_x / (4 d_h (d_x + d_h)) = 3 / (4 (1 + α))   -> 37.5, 25.0, 18.75, 15.0 %

at α = 1, 2, 3, 4, which round to the paper's 33 / 22 / 17 / 13 % and 38 / 25 / 19 / 15 %. We count by summing
the sizes of the arrays that each cell's ``init`` returns (``minimal.cells.{gru, lstm, mingru, minlstm}``), with
``bias=False`` for the comparison with the paper, and report the counts with one bias per gate too
(``*_pct_bias_alpha*``): biases add 2 d_h, 3 d_h, 3 d_h, 4 d_h, which moves the ratios by under one point at
d_x = 64 (minGRU 33.6 % at α = 1, which would round to 34 %; it rounds to 33 % only from d_x = 100 on).

Differs from the paper: nothing measured; d_x = 64 (the selective-copying input size of App. C.2) is needed only
for the with-bias counts. Our GRU and LSTM have one bias per gate (cuDNN-style implementations have two).

Glossary: d_x = D input features, d_h = H = α D hidden units.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cells import gru, lstm, mingru, minlstm
from ...validate import check_config, check_fits

__all__ = ["Config", "PAPER", "run", "plot", "table", "count", "closed_form"]

PAPER = {  # Sec. 3.1.3 (minGRU) and Sec. 3.2.4 (minLSTM): % of the traditional cell's parameters at d_h = α d_x
    "mingru_pct_alpha1": 33, "mingru_pct_alpha2": 22, "mingru_pct_alpha3": 17, "mingru_pct_alpha4": 13,
    "minlstm_pct_alpha1": 38, "minlstm_pct_alpha2": 25, "minlstm_pct_alpha3": 19, "minlstm_pct_alpha4": 15,
}

# minimal cell -> the traditional cell it simplifies
PAIRS = {"mingru": gru, "minlstm": lstm}
MINIMAL = {"mingru": mingru, "minlstm": minlstm}


@dataclass
class Config:
    d_x: int = 64                      # App. C.2 (selective copying: input dimension 64); the % do not depend on it
    alphas: tuple = (1, 2, 3, 4)       # Sec. 3.1.3 / 3.2.4: d_h = α d_x for α = 1, 2, 3, 4
    seed: int = 0                      # init draws random values; only the shapes matter here

    def __post_init__(self):
        # every field checked by its own name, before any work (rules from the defaults: validate.check_config),
        # then the sizes: the largest cell's float64 parameters (the LSTM's, at the largest alpha; each cell's are
        # counted and dropped in turn) must fit in memory
        check_config(self, {"alphas": ("grid", "int>=1")})
        alpha = max(self.alphas)
        check_fits(f"Config.d_x={self.d_x} with alphas up to {alpha} (d_h = {alpha * self.d_x}) makes the LSTM's "
                   f"float64 parameters", 8 * closed_form("lstm", self.d_x, alpha * self.d_x, True),
                   "choose a smaller d_x (the percentages do not depend on it)")

    @classmethod
    def quick(cls):
        """The full count: it takes milliseconds."""
        return cls()


def count(params):
    """Number of parameters: the sum of the sizes of the arrays in a params dict."""
    return int(sum(np.asarray(v).size for v in params.values()))


def closed_form(name, d_x, d_h, bias):
    """The count from the formula: 2 H D, 3 H (D + H), 3 H D, 4 H (D + H) weights (+ one H-bias per gate)."""
    n_gates, recurrent = {"mingru": (2, False), "gru": (3, True), "minlstm": (3, False), "lstm": (4, True)}[name]
    weights = n_gates * d_h * (d_x + (d_h if recurrent else 0))
    return weights + (n_gates * d_h if bias else 0)


def run(config: Config = None, out_dir=None, progress=True):
    """Count every cell's parameters at d_h = α d_x; returns counts and percentages (minimal / traditional).

    Metrics: ``<cell>_params_alpha<α>`` (weights only) and ``<cell>_params_bias_alpha<α>`` for the four cells,
    ``<min>_pct_alpha<α>`` (weights only, as the paper) and ``<min>_pct_bias_alpha<α>`` for mingru, minlstm.
    """
    config = config or Config()
    rng = np.random.default_rng(config.seed)
    cells = {"mingru": mingru, "gru": gru, "minlstm": minlstm, "lstm": lstm}
    metrics = {}
    for alpha in config.alphas:
        d_h = alpha * config.d_x
        for bias, tag in ((False, ""), (True, "bias_")):
            n = {name: count(mod.init(rng, config.d_x, d_h, bias=bias)) for name, mod in cells.items()}
            for name, v in n.items():
                metrics[f"{name}_params_{tag}alpha{alpha}"] = v
            for small, big in (("mingru", "gru"), ("minlstm", "lstm")):
                metrics[f"{small}_pct_{tag}alpha{alpha}"] = 100.0 * n[small] / n[big]
        if progress:
            print(f"alpha={alpha}: minGRU {metrics[f'mingru_pct_alpha{alpha}']:.1f} % of GRU, "
                  f"minLSTM {metrics[f'minlstm_pct_alpha{alpha}']:.1f} % of LSTM", flush=True)
    return metrics


def table(metrics, alphas=(1, 2, 3, 4)):
    """Markdown table: α, the four counts (weights only), the two percentages and the paper's."""
    lines = ["| α | GRU | minGRU | minGRU / GRU | paper | LSTM | minLSTM | minLSTM / LSTM | paper |",
             "|---|---|---|---|---|---|---|---|---|"]
    for a in alphas:
        m = {k: metrics[f"{k}_params_alpha{a}"] for k in ("gru", "mingru", "lstm", "minlstm")}
        lines.append(f"| {a} | {m['gru']:,} | {m['mingru']:,} | {metrics[f'mingru_pct_alpha{a}']:.1f} % | "
                     f"{PAPER[f'mingru_pct_alpha{a}']} % | {m['lstm']:,} | {m['minlstm']:,} | "
                     f"{metrics[f'minlstm_pct_alpha{a}']:.1f} % | {PAPER[f'minlstm_pct_alpha{a}']} % |")
    return "\n".join(lines)


def plot(metrics, out_dir):
    """Bar chart of the percentages against the paper's; returns [png path]."""
    from .._plotting import pyplot, save_figure

    plt = pyplot()
    alphas = sorted({int(k.rsplit("alpha", 1)[1]) for k in metrics if k.startswith("mingru_pct_alpha")})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    w = 0.2
    for j, name in enumerate(("mingru", "minlstm")):
        ours = [metrics[f"{name}_pct_alpha{a}"] for a in alphas]
        paper = [PAPER.get(f"{name}_pct_alpha{a}", np.nan) for a in alphas]
        x = np.arange(len(alphas)) + (2 * j - 1.5) * w
        ax.bar(x, ours, w, label=f"{name} (ours)")
        ax.bar(x + w, paper, w, label=f"{name} (paper)", alpha=0.5)
    ax.set_xticks(np.arange(len(alphas)), [f"α = {a}" for a in alphas])
    ax.set_ylabel("% of the traditional cell's parameters")
    ax.set_xlabel("expansion α (d_h = α d_x)")
    ax.legend(fontsize=8)
    return [save_figure(fig, out_dir, "param_counts.png")]
