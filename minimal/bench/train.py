"""One training step of every model the course trains, timed (``python -m minimal bench train``), and, where PyTorch
or JAX is installed (the ``[anchors]`` extra), the same models written in each of them timed beside ours: the
anchors a user would pick instead of this library (``minimal.bench.torch_models``, ``minimal.bench.jax_models``).

A step is what ``minimal.run.train`` runs: forward and loss, backward, clipping of the global gradient norm at 1.0,
one AdamW update (``minimal.optim``), on one fixed batch (sampling is not timed). Models, with the shapes of
their experiments' Configs (imported, so the rows follow the experiments):

    selective copy  minGRU / minLSTM x2 and x3, vanilla and log space   ``experiments.minrnn.selective_copy``:
                    Job() (D 32, H 192, T 64, B 64) with ``log_space`` False (Table 1's vanilla grid) and True
    Shakespeare     minGRU / minLSTM, vanilla and log space, and the Transformer   ``experiments.minrnn.
                    shakespeare``: Config() (D 64, 3 blocks, T 128, B 16, dropout 0.1); the model its ``spec``
                    builds, each block's ``log_space`` set to the row's form; the Transformer with its
                    ``N_HEADS`` heads and learned positions for T_max = Config.T

Parts: "forward" (forward and loss), "backward" (the gradients), "update" (clip and AdamW), timed inside each step;
and "cell", the forward and backward of one block's recurrent cell alone on that block's input shape (for the
minRNN rows). Each step and part is timed in CPU time of this process (``time.process_time``): the other
processes of a shared machine cost it wall time, not CPU time, although they still share its caches. A jitted
JAX step is one call: it has "step" and "cell" only.

Timing: one BLAS thread (``speed.tune``), one torch thread (inductor's too), one XLA thread; two warm-up calls of
every row (torch.compile and jax.jit compile there), then ``repeats`` rounds, each running one step of every row
and version in turn (ours and the anchors interleaved, so that every row sees the same spells of load), in a new
order each round (``rounds.interleaved_minima``: the step that ran just before changes a step's time); each row
reports its minimum and median over the rounds, and its minor page faults per step. The fair setting, on a quiet
machine: the whole process pinned to one core (``--pin N`` or ``taskset -c N``) and jemalloc preloaded for every
side with its decay off (``LD_PRELOAD=.../libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1``).
Under glibc, JAX's per-step scratch (57-73 MB) exceeds the mmap threshold and the kernel zero-fills it every step
(14,000-18,000 page faults a step), which times the allocator, not the framework; jemalloc with its default decay
hands those pages back too, and gives our NumPy step ~10,000 faults a step it has not under glibc; with decay off
both sides run at under 100 (``jax_models``' docstring). The "faults" column shows which case a run was in. And
NumPy's OpenBLAS on the kernel it picks for the CPU: an environment can name an older one (``OPENBLAS_CORETYPE``),
and an AVX2 kernel on an AVX-512 core ran a sgemm of the steps' shapes at about half the rate of the AVX-512 one
(``bench/results/train_cpu_2026-12-02_kernel.txt``); the command prints a note when that is so
(``minimal.run.speed.blas_kernel_advice``). And memory left resident: a kernel that reclaims idle memory (Linux
DAMON with a pageout scheme, /sys/kernel/mm/damon/admin) pages out each row's arrays between its rounds in a long run,
and its steps then page-fault thousands of times (``bench/results/train_cpu_2026-12-02_f32.txt``, section 7; with it
off, ``train_cpu_2026-12-02_kernel.txt``): switch it off for the run, or time fewer rows (``--only``).

The anchors (never dependencies of ``minimal``): each model is first run in float64 by ours and by every version
of each framework, from the same parameters on the same batch with dropout off, and the losses and every gradient
are compared (``max_rel``: the largest |g_theirs - g_ours| / max|g_ours| over the gradients); a framework whose twin
differs by more than ``EQUAL_TOL`` gets no timing for that model. The recurrence comes in the versions a user of
each would write: torch eager, vanilla as a Python loop under autograd ("loop") and as a
``torch.autograd.Function`` with a hand-written reverse-time scan ("scan Function"), log space as Heinsen's closed
form with ``torch.logcumsumexp`` ("Heinsen"), attention as ``F.scaled_dot_product_attention`` ("sdpa");
torch.compile (``dynamic=False``, inductor) of the whole loss function, AdamW eager: vanilla as
``torch._higher_order_ops.associative_scan`` ("compile: associative scan"; "compile: loop" where this torch cannot
compile it on the CPU), log space as Heinsen ("compile: Heinsen"), attention as sdpa ("compile: sdpa"), each
compiled once, in the warm-up (``torch_models``); JAX, the whole step under one ``jax.jit`` with optax's AdamW, the recurrence as
``lax.scan``, ``lax.associative_scan`` or (log space) Heinsen's form. ``ratio`` = our step's time / the fastest
version's of any framework: below 1 we are faster. The last measured table, with its command, is
``bench/results/train_cpu_<date>.txt``.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from ..validate import InputError, check_positive_int
from .rounds import interleaved_minima

__all__ = ["Model", "models", "project_step", "bench_train", "add_ratios", "format_train_table",
           "EQUAL_TOL", "DEFAULT_REPEATS", "ANCHORS", "installed_twins", "choose"]

DEFAULT_REPEATS = 20
EQUAL_TOL = 1e-8      # float64: the two implementations agree to rounding (~1e-13 seen), or they are not the same


class Model(NamedTuple):
    """One model as trained, with what a step needs."""
    name: str
    family: str                 # "selective_copy" or "shakespeare"
    kind: str                   # "mingru", "minlstm" or "attention"
    log_space: bool
    params: dict                # float32, as the experiment trains
    batch: tuple                # (inputs (B, T) ids, targets): the fixed batch every step reuses
    loss_and_grads: Callable    # (params, batch, dropout_rate, rng) -> (loss, grads)
    dropout: float
    meta: dict                  # shapes and anything the torch twin needs (depth, D, H, M, kernel, ...)


# --- the models -------------------------------------------------------------------------------------------------
def _selective_copy(kind, depth, log_space, dtype="float32"):
    from ..experiments.minrnn import selective_copy as S, selective_copy_model as SCM
    from ..tasks import selective_copy as task

    job = S.Job(kind=kind, depth=depth, dtype=dtype, log_space=log_space)
    params = SCM.init_params(np.random.default_rng(0), job)
    b = task.sample(np.random.default_rng(1), job.batch, job.T, job.n_data, job.vocab)

    def loss_and_grads(p, batch, dropout, rng):
        return SCM.loss_and_grads(p, job, *batch)

    return Model(f"selective copy {kind} x{depth}" + (" log" if log_space else ""), "selective_copy", kind,
                 log_space, params, (b.inputs, b.targets), loss_and_grads, 0.0,
                 {"depth": depth, "D": job.D, "H": job.expansion * job.D, "T": job.T, "B": job.batch,
                  "M": job.n_data, "V": job.vocab})


def _shakespeare_spec(kind, V, config, log_space, dropout, rng):
    """The experiment's own stack (``shakespeare.spec``), in training mode; log space set in each block."""
    from ..experiments.minrnn import shakespeare_model as SM

    kw = dict(expansion=config.expansion, kernel=config.kernel, dropout=dropout, rng=rng, train=True)
    if kind == "attention":
        return SM.spec(kind, V, config.D, config.n_layers, T_max=config.T, **kw)   # T_max: ``SM.init_lm``'s
    spec = SM.spec(kind, V, config.D, config.n_layers, **kw)
    # The block's form (vanilla or log space) set explicitly, whatever the kind name's default.
    return tuple(e._replace(forward={**e.forward, "log_space": log_space}) if getattr(e, "name", "") == "min_block"
                 else e for e in spec)


def _shakespeare(kind, log_space, dtype="float32"):
    from .. import models
    from ..experiments.minrnn import shakespeare as Sh
    from ..experiments.minrnn import shakespeare_model as SM
    from ..layers import cross_entropy
    from ..tasks import char_lm

    config = Sh.Config()
    data = char_lm.load()
    V = len(data.vocab)
    params = SM.init_lm(np.random.default_rng(0), kind, V, config.D, config.n_layers, config.expansion,
                        config.kernel, dtype)
    x, y = char_lm.split_xy(char_lm.sample_batch(data.train, config.batch, config.T, np.random.default_rng(1)))

    def loss_and_grads(p, batch, dropout, rng):
        z, cache = models.forward(p, batch[0], _shakespeare_spec(kind, V, config, log_space, dropout, rng))
        loss, c = cross_entropy.forward({}, z, batch[1])
        dz, _ = cross_entropy.backward({}, c, np.ones((), z.dtype))
        return float(loss), models.backward(p, cache, dz)[1]

    name = {"mingru": "minGRU", "minlstm": "minLSTM", "attention": "Transformer"}[kind]
    return Model(f"Shakespeare {name}" + (" log" if log_space else ""), "shakespeare", kind, log_space, params,
                 (np.ascontiguousarray(x), np.ascontiguousarray(y)), loss_and_grads, config.dropout,
                 {"depth": config.n_layers, "D": config.D, "H": config.expansion * config.D, "T": config.T,
                  "B": config.batch, "V": V, "kernel": config.kernel,
                  "n_heads": getattr(Sh, "N_HEADS", 1) if kind == "attention" else 1})


def models(quick=False, dtype="float32"):
    """Every model the course trains (module docstring); ``quick``: a few of each family."""
    out = [_selective_copy(k, d, ls, dtype) for ls in ((False,) if quick else (False, True))
           for k in ("mingru", "minlstm") for d in ((2,) if quick else (2, 3))]
    combos = [("mingru", False), ("minlstm", True)] if quick else [
        ("mingru", False), ("minlstm", False), ("mingru", True), ("minlstm", True), ("attention", False)]
    out += [_shakespeare(k, ls, dtype) for k, ls in combos]
    return out


def as_dtype(model, dtype):
    """The model with its params cast to ``dtype`` (the float64 equality check)."""
    return model._replace(params={k: v.astype(dtype) for k, v in model.params.items()})


# --- one step -----------------------------------------------------------------------------------------------------
def project_step(model, clip=1.0, lr=1e-3):
    """A closure running one training step of ``model`` (forward and loss, backward, clip, AdamW) on its batch,
    carrying params and optimiser state from call to call (``.state``); each call returns {part: CPU seconds}."""
    from ..optim import adamw_init, adamw_step, clip_by_global_norm

    state = {"params": model.params, "opt": adamw_init(model.params)}
    rng = np.random.default_rng(2)

    def step():
        t0 = time.process_time()
        loss, grads = model.loss_and_grads(state["params"], model.batch, model.dropout, rng)
        t1 = time.process_time()
        grads, _ = clip_by_global_norm(grads, clip)
        state["params"], state["opt"] = adamw_step(state["params"], grads, state["opt"], lr)
        t2 = time.process_time()
        return {"step": t2 - t0, "forward+backward": t1 - t0, "update": t2 - t1}

    step.state = state   # the params and optimiser state it carries (for tests)
    return step


def _cell_step(model):
    """Forward and backward of one block's recurrent cell on a (B, T, D) input (minRNN rows), or None."""
    if model.kind not in ("mingru", "minlstm"):
        return None
    from ..cells import REGISTRY

    cell = REGISTRY[model.kind]
    prefix = "1.1." if model.family == "selective_copy" else "1.rnn."
    p = {k[len(prefix):]: v for k, v in model.params.items() if k.startswith(prefix)}
    m = model.meta
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m["B"], m["T"], m["D"])).astype(np.float32)
    dy = rng.standard_normal((m["B"], m["T"], m["H"])).astype(np.float32)

    def step():
        t0 = time.process_time()
        _, cache = cell.forward(p, x, log_space=model.log_space)
        cell.backward(p, cache, dy)
        return {"cell": time.process_time() - t0}

    return step, (p, x, dy)


# --- the benchmark --------------------------------------------------------------------------------------------------
ANCHORS = {"torch": "torch_models", "jax": "jax_models"}   # framework -> its twins' module in minimal.bench


def _anchor(name):
    """The twins' module of framework ``name`` if the framework can be imported, else None."""
    import importlib

    try:
        return importlib.import_module(f".{ANCHORS[name]}", __package__)
    except ImportError:
        return None


def installed_twins(anchors, log, what):
    """{framework: its twins' module} for the frameworks of ``anchors`` (names of ``ANCHORS``; () or None: none)
    that are installed; each one that is not is skipped with a notice to ``log`` saying what is missing without it
    (``what``: "rows", "matrix-product rate")."""
    anchors = tuple(anchors or ())
    for name in anchors:
        if name not in ANCHORS:
            raise ValueError(f"anchors: unknown framework {name!r}; expected some of {sorted(ANCHORS)}")
    twins = {}
    for name in anchors:
        twins[name] = _anchor(name)
        if twins[name] is None:
            log(f"{name} is not installed: no {name} {what} (pip install -e \".[anchors]\" to compare)")
    return {k: v for k, v in twins.items() if v is not None}


def choose(rows, only):
    """The models of ``rows`` named in ``only`` (None: all of them), in ``rows``' order; an unknown name is an
    InputError that lists the rows."""
    if only is None:
        return list(rows)
    unknown = sorted(set(only) - {m.name for m in rows})
    if unknown:
        raise InputError(f"only: no row named {unknown}; the rows are {[m.name for m in rows]}")
    return [m for m in rows if m.name in set(only)]


def bench_train(repeats=None, quick=False, anchors=tuple(ANCHORS), only=None, cells=True, burst=1, log=print):
    """Time every model's training step (module docstring), ours and, per framework of ``anchors`` that is
    installed, its twins' versions.

    Args:
        repeats: rounds (minimum and median over them); default 20. quick: a few models of each family.
        anchors: frameworks to compare with, of ``ANCHORS`` (() or None: none; a framework that is not installed
            is skipped with a notice, never imported otherwise).
        only: the names of the rows to time (None: every row of ``models(quick)``); an unknown name is an error.
        cells: also time each minRNN row's cell alone (the "cell" part).
        burst: calls of each runner in a row per round (``interleaved_minima``): above 1, the table also gives
            each step's time right after a step of its own ("step warm", "ratio warm").
        log: where progress and notices go (a callable taking a str).
    Returns:
        one dict per model: name, ours {part: seconds, "<part> median": seconds}, and with a framework: checks
        {framework: {"max_rel", "equal"}} (the float64 check), theirs {"framework: version": {part: ...}},
        fastest (the fastest of theirs) and ratio (ours / fastest, step minima); bursts add their warm twins.
    """
    from ..run import speed

    repeats = check_positive_int("repeats", DEFAULT_REPEATS if repeats is None else repeats)
    twins = installed_twins(anchors, log, "rows")
    chosen = choose(models(quick), only)
    speed.tune()
    rows = []
    runners = []   # (row, where, version, fn)
    for model in chosen:
        row = {"name": model.name, "ours": {}}
        rows.append(row)
        runners.append((row, "ours", None, project_step(model)))
        cell = _cell_step(model) if cells else None
        if cell is not None:
            runners.append((row, "ours", None, cell[0]))
        for name, tm in twins.items():
            check = tm.check_equal(as_dtype(model, np.float64))
            row.setdefault("checks", {})[name] = {"max_rel": check["max_rel"], "equal": check["max_rel"] <= EQUAL_TOL}
            row.setdefault("theirs", {})
            if check["max_rel"] > EQUAL_TOL:
                log(f"{model.name}: the {name} twin differs from our model (max rel. error {check['max_rel']:.1e} > "
                    f"{EQUAL_TOL:.0e} in float64{'; ' + check['why'] if 'why' in check else ''}): no {name} timing "
                    f"for it")
                continue
            for version in tm.versions(model):
                label = f"{name}: {version}"
                row["theirs"][label] = {}
                runners.append((row, "theirs", label, tm.step(model, version)))
                if cell is not None:
                    runners.append((row, "theirs", label, tm.cell_step(model, version, *cell[1])))
    interleaved_minima(runners, repeats, log, burst=burst)
    return add_ratios(rows)


def add_ratios(rows):
    """Per row with timings of another framework: ``fastest`` (the version of ``theirs`` with the least step
    time) and ``ratio`` (our step / that step, minima); where the rounds ran bursts (``interleaved_minima``), also
    ``fastest warm`` and ``ratio warm``, the same from the "step warm" minima."""
    for row in rows:
        if row.get("theirs"):
            row["fastest"] = min(row["theirs"], key=lambda v: row["theirs"][v]["step"])
            row["ratio"] = row["ours"]["step"] / row["theirs"][row["fastest"]]["step"]
            if "step warm" in row["ours"]:
                row["fastest warm"] = min(row["theirs"], key=lambda v: row["theirs"][v]["step warm"])
                row["ratio warm"] = row["ours"]["step warm"] / row["theirs"][row["fastest warm"]]["step warm"]
    return rows


def format_train_table(rows):
    """A plain-text table of ``bench_train``'s rows."""
    has = any("checks" in r for r in rows)
    ms = (lambda s: f"{1e3 * s:.2f}" if s is not None else "")
    head = f"{'model':<30} {'step ms':>8} {'median':>8} {'fwd+bwd':>8} {'update':>7} {'cell':>7} {'faults':>7}"
    if has:
        head += f" {'fastest other':<28} {'ms':>8} {'median':>8} {'faults':>7} {'ratio':>6} {'f64 err':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        o = r["ours"]
        line = (f"{r['name']:<30} {ms(o['step']):>8} {ms(o.get('step median')):>8} {ms(o['forward+backward']):>8} "
                f"{ms(o['update']):>7} {ms(o.get('cell')):>7} {o.get('page faults', 0):>7.0f}")
        if has:
            worst = max((c["max_rel"] for c in r.get("checks", {}).values()), default=float("nan"))
            if r.get("fastest"):
                t = r["theirs"][r["fastest"]]
                line += (f" {r['fastest']:<28} {ms(t['step']):>8} {ms(t.get('step median')):>8} "
                         f"{t.get('page faults', 0):>7.0f} {r['ratio']:>6.2f} {worst:>8.1e}")
            elif "checks" in r:
                line += f" {'differs: not timed':<28} {'':>8} {'':>8} {'':>7} {'':>6} {worst:>8.1e}"
        lines.append(line)
    lines.append("-" * len(head))
    lines.append("CPU ms per step, min (and median) over interleaved rounds, one thread; step = forward+backward (with "
                 "the loss) + update (clip 1.0, AdamW); cell = one block's recurrent cell, forward + backward; faults "
                 "= minor page faults per step (median)")
    if has:
        lines.append("ratio = our step / the fastest other version's step (below 1: we are faster); f64 err = the "
                     "largest relative loss or gradient difference of the float64 checks (every framework)")
        lines += _versions(rows, "step")
    if any("step warm" in r["ours"] for r in rows):
        lines += ["", _format_warm(rows, ms, has)]
    return "\n".join(lines)


def _format_warm(rows, ms, has):
    """The "step warm" table of a run with bursts (``interleaved_minima``)."""
    head = f"{'model':<30} {'warm ms':>8} {'median':>8}"
    if has:
        head += f" {'fastest other, warm':<34} {'ms':>8} {'median':>8} {'ratio':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        o = r["ours"]
        line = f"{r['name']:<30} {ms(o['step warm']):>8} {ms(o.get('step warm median')):>8}"
        if has and r.get("fastest warm"):
            t = r["theirs"][r["fastest warm"]]
            line += (f" {r['fastest warm']:<34} {ms(t['step warm']):>8} {ms(t.get('step warm median')):>8} "
                     f"{r['ratio warm']:>6.2f}")
        lines.append(line)
    lines.append("-" * len(head))
    lines.append("warm = the steps of each burst after its first: each right after a step of its own model and "
                 "version, as in a training loop (the table above: each burst's first step, after another runner's)")
    return "\n".join(lines + (_versions(rows, "step warm") if has else []))


def _versions(rows, part):
    """One line per row with more than one version of theirs: each version's ``part`` in ms."""
    return [f"  {r['name']}: " + ", ".join(f"{v} {1e3 * t[part]:.2f} ms" for v, t in r["theirs"].items())
            for r in rows if len(r.get("theirs", {})) > 1]
