"""Every figure the experiments draw reads on its own: each panel names both axes, each image has a colour bar,
and each line of a panel with several lines has a legend entry (its label, or its colour and its line style in
the legend). Small made-up metrics in the shape each ``plot`` reads; no training."""
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from minimal.experiments.zucchet import architectures as A, hidden_size as HS, icl, icl_seeds, teacher_student as TS
from minimal.experiments.zucchet import teacher_student_figures as TSF
from minimal.experiments.gril import (ablations as GA, classification as GC, comparison as GCmp,
                                      comparison_models as GCmpM, model as GM, multistep as GMS, regression as GR)
from minimal.experiments.minrnn import param_counts as MP, runtime as MR, selective_copy as MS, shakespeare as MSh
from minimal.experiments.minrnn import shakespeare_model as SM
from minimal.experiments.zucchet import stacks

rng = np.random.default_rng(0)


def _curve(n=20):
    return list(np.exp(-np.linspace(0, 3, n)) + 0.1)


def _zucchet():
    rows = [{"task": t, "arch": a, "layers": l, "n_params": n, "fig4_rel_loss": 0.5 / n ** 0.1,
             "train_rel_loss": 0.4, "rel_loss": 0.5, "ood_rel_loss": 0.6}
            for t in A.TASKS for a in stacks.ARCHS for l in (1, 2) for n in (100, 1000)]
    return [
        (icl, {"train_loss_curve": _curve(), "steps": 100, "loss_gd": 0.0947, "coef_x2_y1": [0.068, 0.069, 0.067],
               "eta_star": 0.0676, "residual_norm": 1e-3}),
        (icl_seeds, {"eta_star": 0.0676, "per_seed": {"coef_x2_y1_mean": [0.0681, 0.0683],
                                                      "coef_predicted_from_lam": [0.11, 0.045]}}),
        (HS, {"teacher_hiddens": [10, 30, 60], "teacher_rel_loss": [1e-1, 1e-3, 1e-5],
              "construction_neurons_teacher": 27,
              "icl_hiddens": [10, 20, 40], "icl_rel_loss": [2.0, 1.1, 0.99], "construction_neurons_icl": 35,
              "gd_neurons_icl": 12}),
        (A, {"rows": rows}),
    ]


def _gril():
    L = 2
    heads = {f"cqQ_{l}_over_eta_N": rng.normal(size=(3, 3)) for l in range(1, L + 1)}
    heads.update({f"cQ_tilde_{l}_over_eta_N": rng.normal(size=(3, 3)) for l in range(2, L + 1)})
    ablations = {f"{t}_{v}{s}": 0.5
                 for t in ("scalar", "multivariate") for v in GM.VARIANTS for s in ("", "_over_zero")}
    ablations.update({"dims_f": [2, 5, 10], "dims_loss": [0.1, 0.3, 0.8], "dims_loss_gd": [0.1, 0.3, 0.8]})
    comparison = {"multivariate_gd": 0.8, "multivariate_zero": 1.67}
    comparison.update({f"multivariate_{m}_over_zero": 0.6 for m in GCmpM.MODELS})
    classification = {"config": {"steps": 100}}
    for task in GC.TASKS:
        p = task + "_"
        classification.update({p + "train_curve": _curve(), p + "nophi_train_curve": _curve(), p + "loss_gd": 0.3,
                               p + "loss_chance": 0.69, p + "pred_l2": 0.1, p + "nophi_pred_l2": 0.2,
                               p + "sens_cos": 0.9, p + "nophi_sens_cos": 0.8,
                               p + "rescale": {str(a): {"gril": 0.3, "gril_std": 0.01, "nophi": 0.4, "nophi_std": 0.02,
                                                        "gd": 0.35} for a in (0.5, 1.0, 2.0)}})
    return [
        (GR, {"train_curve": _curve(), "config": {"steps": 100}, "loss_gd": 0.5,
              "rescale": {str(a): {"gril_over_zero": 0.3 * a, "gd_over_zero": 0.3 / a} for a in GR.Config().scales},
              "params": {"Q_over_Q10": rng.normal(size=(3, 3))}}),
        (GA, ablations),
        (GMS, {"config": {"L": L, "steps": 100}, "params": heads, "train_curve_gril1": _curve(),
               "train_curve_gril2": _curve(), "loss_gd1": 0.5, "loss_gd2": 0.3, "loss_gd2_free_steps": 0.25,
               "sine_loss_zero": 1.0, "sine_loss_linear_gd1": 0.8, "sine_loss_linear_gd1_best_eta": 0.7,
               "sine_loss_gd_mlp": 0.5, "sine_loss_gril_mlp": 0.45}),
        (GCmp, comparison),
        (GC, classification),
    ]


def _minrnn():
    Ts = [64, 128, 256, 512]
    names = list(MR.BASELINE)
    sel = {f"{k}_{d}{s}": 50.0 for k in ("mingru", "minlstm") for d in (1, 2, 3) for s in ("", "_std")}
    sel.update({"gru_1": 99.0, "gru_1_std": 0.1, "rows": ["gru_1"]})
    return [
        (MP, {f"{n}_pct_alpha{a}": 100 / (a + 2) for n in ("mingru", "minlstm") for a in (1, 2, 3, 4)}),
        (MR, {"T": Ts, "times_ms": {n: [1.0 * T for T in Ts] for n in (*names, "gru", "lstm")},
              "speedup": {n: [3.0] * len(Ts) for n in names},
              "cache_bytes": {n: [1e6 * T for T in Ts] for n in (*names, "gru", "lstm")}}),
        (MSh, {"config": {"D": 48}, "models": {k: {"curve_steps": [0, 50, 100], "curve": [3.0, 2.5, 2.2]}
                                               for k in SM.KINDS}}),
        (MS, sel),
    ]


CASES = _zucchet() + _gril() + _minrnn()


@pytest.fixture
def drawn(monkeypatch):
    """Every Figure that is saved (the plot functions close theirs after saving)."""
    figures, save = [], Figure.savefig

    def record(self, *args, **kw):
        figures.append(self)
        return save(self, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", record)
    return figures


def problems(fig):
    """What a reader of ``fig`` would miss, as sentences (empty: it reads)."""
    out = []
    images = [im for ax in fig.axes for im in ax.images]
    colorbar_axes = {im.colorbar.ax for im in images if im.colorbar is not None}
    out += [f"an image in {im.axes.get_title()!r} has no colour bar" for im in images if im.colorbar is None]
    for ax in fig.axes:
        if ax in colorbar_axes:
            continue
        name = ax.get_title() or f"panel {fig.axes.index(ax)}"
        if not ax.get_xlabel():
            out.append(f"{name!r}: no x label")
        if not ax.get_ylabel():
            out.append(f"{name!r}: no y label")
        if ax.images:
            continue   # lines on a heatmap mark its blocks
        labels, skip = {}, set()
        for c in ax.containers:
            if isinstance(c, ErrorbarContainer):
                data, caps, _ = c.lines
                if data is not None:
                    labels[id(data)] = c.get_label()
                skip.update(id(x) for x in caps)
        lines = [l for l in ax.get_lines() if id(l) not in skip and len(l.get_xdata())]
        if len(lines) < 2:
            continue
        legends = [lg for lg in (ax.get_legend(), *fig.legends) if lg is not None]   # its own, or the figure's
        if not legends:
            out.append(f"{name!r}: {len(lines)} lines and no legend")
            continue
        texts = {t.get_text() for lg in legends for t in lg.get_texts()}
        handles = [h for lg in legends for h in lg.legend_handles if isinstance(h, Line2D)]
        colours = {str(h.get_color()) for h in handles}
        styles = {h.get_linestyle() for h in handles}
        for l in lines:
            label = labels.get(id(l), l.get_label())
            if label not in texts and not (str(l.get_color()) in colours and l.get_linestyle() in styles):
                out.append(f"{name!r}: a line ({label!r}) has no legend entry")
    return out


@pytest.mark.parametrize("mod,metrics", CASES, ids=[m.__name__.split("experiments.")[1] for m, _ in CASES])
def test_every_figure_names_its_axes_colours_and_lines(mod, metrics, drawn, tmp_path):
    paths = mod.plot(metrics, tmp_path)
    assert paths and all(p.exists() for p in map(__import__("pathlib").Path, paths))
    assert len(drawn) == len(paths)
    for fig in drawn:
        assert problems(fig) == [], problems(fig)


# The figures redrawn for a reader at a glance (issue 33): at most 6 lines per panel, and every legend outside
# every panel's data area (beside the panel or the figure), so that none covers a line, a bar or a marker.
AT_A_GLANCE = (A, HS, icl, GA, GCmp, GC, MR)


def crowding(fig):
    """Sentences for panels with more than 6 lines, and legends that overlap a panel."""
    out = []
    panels = [ax for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]
    for ax in panels:
        caps = {id(x) for c in ax.containers if isinstance(c, ErrorbarContainer) for x in c.lines[1]}
        lines = [l for l in ax.get_lines() if id(l) not in caps and len(l.get_xdata())]
        if len(lines) > 6:
            out.append(f"{ax.get_title() or fig.axes.index(ax)!r}: {len(lines)} lines")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)   # a saved, closed figure keeps only a bare canvas: lay it out again
    canvas.draw()
    renderer = canvas.get_renderer()
    for lg in [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends):
        box = lg.get_window_extent(renderer)
        for ax in panels:
            if box.overlaps(ax.get_window_extent(renderer)):
                out.append(f"a legend ({lg.get_texts()[0].get_text()!r}, ...) overlaps the panel "
                           f"{ax.get_title() or fig.axes.index(ax)!r}")
    return out


@pytest.mark.parametrize("mod,metrics", [c for c in CASES if c[0] in AT_A_GLANCE],
                         ids=[m.__name__.split("experiments.")[1] for m, _ in CASES if m in AT_A_GLANCE])
def test_the_redrawn_figures_have_few_lines_per_panel_and_legends_beside_the_data(mod, metrics, drawn, tmp_path):
    mod.plot(metrics, tmp_path)
    for fig in drawn:
        assert crowding(fig) == [], crowding(fig)


def test_the_crowding_check_sees_a_legend_on_the_data_and_a_crowded_panel():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for i in range(7):
        ax.plot([0, 1], [i, i + 1], label=str(i))
    ax.set(xlabel="x", ylabel="y")
    ax.legend()
    fig.canvas.draw()
    found = crowding(fig)
    plt.close(fig)
    assert any("7 lines" in f for f in found) and any("overlaps" in f for f in found)


@pytest.mark.parametrize("make", [TSF.figure_pruned_weights, TSF.figure_merged_kernel])
def test_the_teacher_student_figures_name_their_axes_and_colours(make):
    import matplotlib.pyplot as plt

    config = TS.Config.quick()
    fig = make(TS.init_student(np.random.default_rng(0), config), config)
    try:
        assert problems(fig) == [], problems(fig)
        if make is TSF.figure_pruned_weights:   # every panel counts neurons: whole numbers on its y axis
            for ax in fig.axes[:6]:
                ticks = [t for t in ax.get_yticks() if ax.get_ylim()[1] <= t <= ax.get_ylim()[0]]
                assert all(float(t).is_integer() for t in ticks), (ax.get_title(), ticks)
    finally:
        plt.close(fig)


def test_the_checker_finds_what_a_reader_would_miss():
    """problems() is not vacuous: an unlabelled panel, a bare image and two unnamed lines are each reported."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    a.plot([0, 1], [0, 1])
    a.plot([0, 1], [1, 0])
    b.imshow(np.eye(3))
    found = problems(fig)
    plt.close(fig)
    assert "'panel 0': no x label" in found and "'panel 0': 2 lines and no legend" in found
    assert any("no colour bar" in p for p in found) and "'panel 1': no y label" in found
