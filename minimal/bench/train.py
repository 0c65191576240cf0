"""One training step of every model the course trains, timed (``python -m minimal bench train``), and, when
PyTorch is installed, the same models written in PyTorch timed beside them (``minimal.bench.torch_models``).

A step is what ``minimal.run.train`` runs: forward and loss, backward, clipping of the global gradient norm at 1.0,
one AdamW update (``minimal.optim``), on one fixed batch (sampling is not timed). Models, with the shapes of
their experiments' Configs (imported, so the rows follow the experiments):

    selective copy  minGRU / minLSTM x2 and x3, vanilla and log space   ``experiments.minrnn.selective_copy``:
                    Job() (D 32, H 192, T 32, B 64) with ``log_space`` False (Table 1's vanilla grid) and True
    Shakespeare     minGRU / minLSTM, vanilla and log space, and the Transformer   ``experiments.minrnn.
                    shakespeare``: Config() (D 64, 3 blocks, T 128, B 16, dropout 0.1); the model its ``spec``
                    builds, each block's ``log_space`` set to the row's form; the Transformer with its
                    ``N_HEADS`` heads and learned positions for T_max = Config.T

Parts: "forward" (forward and loss), "backward" (the gradients), "update" (clip and AdamW), timed inside each step;
and "cell", the forward and backward of one block's recurrent cell alone on that block's input shape (for the
minRNN rows). Each step and part is timed in CPU time of this process (``time.process_time``): the other
processes of a shared machine cost it wall time, not CPU time, although they still share its caches.

Timing: one BLAS thread (``speed.tune``) and one torch thread; two warm-up steps of every row, then ``repeats``
rounds, each running one step of every row in turn (project and torch interleaved, so that every row sees the
same spells of load); each row reports its minimum over the rounds.

Torch (optional; never a dependency of ``minimal``): each model is first run in float64 by both, from the same
parameters on the same batch with dropout off, and the losses and every gradient are compared (``max_rel``: the
largest |g_torch - g_ours| / max|g_ours| over the gradients); a model whose torch twin differs by more than
``EQUAL_TOL`` gets no ratio. The last measured table, with its command, is ``bench/results/train_cpu_<date>.txt``. The recurrence in torch comes in the versions a torch user would write: vanilla as
a Python loop under autograd ("loop") and as a ``torch.autograd.Function`` with a hand-written reverse-time scan
("scan Function"); log space as Heinsen's closed form with ``torch.logcumsumexp`` ("Heinsen"); attention as
``F.scaled_dot_product_attention`` ("sdpa"). ``ratio`` = our step's time / the fastest torch version's: below 1
we are faster.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from ..validate import check_positive_int

__all__ = ["Model", "models", "project_step", "bench_train", "interleaved_minima", "add_ratios", "format_train_table",
           "EQUAL_TOL", "DEFAULT_REPEATS"]

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
def _torch():
    """``minimal.bench.torch_models`` if PyTorch can be imported, else None."""
    try:
        from . import torch_models as _torch_models
    except ImportError:
        return None
    return _torch_models


def bench_train(repeats=None, quick=False, torch=True, log=print):
    """Time every model's training step (module docstring).

    Args:
        repeats: rounds (minimum over them); default 20. quick: one model of each family.
        torch: compare with PyTorch when it is installed (False: never import it).
        log: where progress and the torch notice go (a callable taking a str).
    Returns:
        one dict per model: name, ours {part: seconds}, and with torch: torch {version: {part: seconds}},
        max_rel (float64 check), equal (bool), fastest (the fastest torch version), ratio (ours / fastest).
    """
    from ..run import speed

    repeats = check_positive_int("repeats", DEFAULT_REPEATS if repeats is None else repeats)
    speed.tune()
    tm = _torch() if torch else None
    if torch and tm is None:
        log("PyTorch is not installed: timing our steps only, no torch comparison "
            "(pip install torch, the CPU build, to compare)")
    rows = []
    runners = []   # (row, where, key, fn)
    for model in models(quick):
        row = {"name": model.name, "ours": {}}
        rows.append(row)
        runners.append((row, "ours", None, project_step(model)))
        cell = _cell_step(model)
        if cell is not None:
            runners.append((row, "ours", None, cell[0]))
        if tm is None:
            continue
        check = tm.check_equal(as_dtype(model, np.float64))
        row["max_rel"], row["equal"] = check["max_rel"], check["max_rel"] <= EQUAL_TOL
        row["torch"] = {}
        if not row["equal"]:
            log(f"{model.name}: the torch twin differs from our model (max rel. error {check['max_rel']:.1e} > "
                f"{EQUAL_TOL:.0e} in float64{'; ' + check['why'] if 'why' in check else ''}): no torch timing "
                f"for it")
            continue
        for version in tm.versions(model):
            row["torch"][version] = {}
            runners.append((row, "torch", version, tm.step(model, version)))
            if cell is not None:
                runners.append((row, "torch", version, tm.cell_step(model, version, *cell[1])))
    interleaved_minima(runners, repeats, log)
    return add_ratios(rows)


def interleaved_minima(runners, repeats, log=print, warmup=2):
    """Run every runner ``warmup`` times, then ``repeats`` rounds of each runner once in turn; each part's
    minimum lands in its row: ``row[where][part]`` (version None) or ``row[where][version][part]``.

    runners: (row, where, version, fn) with fn() -> {part: seconds}."""
    for _ in range(warmup):
        for _, _, _, fn in runners:
            fn()
    for r in range(repeats):
        for row, where, version, fn in runners:
            target = row[where] if version is None else row[where][version]
            for part, seconds in fn().items():
                target[part] = min(target.get(part, np.inf), seconds)
        log(f"round {r + 1}/{repeats}")


def add_ratios(rows):
    """Per row with torch timings: ``fastest`` (the torch version with the least step time) and ``ratio``
    (our step / that step)."""
    for row in rows:
        if row.get("torch"):
            row["fastest"] = min(row["torch"], key=lambda v: row["torch"][v]["step"])
            row["ratio"] = row["ours"]["step"] / row["torch"][row["fastest"]]["step"]
    return rows


def format_train_table(rows):
    """A plain-text table of ``bench_train``'s rows."""
    has_torch = any("torch" in r for r in rows)
    head = f"{'model':<30} {'step ms':>8} {'fwd+bwd':>8} {'update':>7} {'cell':>7}"
    if has_torch:
        head += f" {'torch ms':>9} {'torch version':<15} {'cell':>7} {'ratio':>6} {'cell':>6} {'f64 err':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        o = r["ours"]
        ms = (lambda s: f"{1e3 * s:.2f}" if s is not None else "")
        line = (f"{r['name']:<30} {ms(o['step']):>8} {ms(o['forward+backward']):>8} {ms(o['update']):>7} "
                f"{ms(o.get('cell')):>7}")
        if has_torch:
            if r.get("fastest"):
                t = r["torch"][r["fastest"]]
                cell_ratio = f"{o['cell'] / t['cell']:.2f}" if "cell" in o and "cell" in t else ""
                line += (f" {ms(t['step']):>9} {r['fastest']:<15} {ms(t.get('cell')):>7} {r['ratio']:>6.2f} "
                         f"{cell_ratio:>6} {r['max_rel']:>8.1e}")
            elif "max_rel" in r:
                line += f" {'differs: not timed':>33} {'':>14} {r['max_rel']:>8.1e}"
        lines.append(line)
    lines.append("-" * len(head))
    lines.append("CPU ms per step, min over rounds, one thread; step = forward+backward (with the loss) + update "
                 "(clip 1.0, AdamW); cell = one block's recurrent cell, forward + backward")
    if has_torch:
        lines.append("ratio = our step / torch's fastest version's step (below 1: we are faster); f64 err = largest "
                     "relative gradient difference of the float64 check")
        for r in rows:
            if len(r.get("torch", {})) > 1:
                lines.append(f"  {r['name']}: " + ", ".join(f"{v} {1e3 * t['step']:.2f} ms"
                                                           for v, t in r["torch"].items()))
    return "\n".join(lines)
