"""Speed of the Zucchet gated RNN's training step (``python -m minimal bench step``): forward + backward on the
teacher-student and ICL tasks' shapes, the ICL readout "all" against "last", and the teacher-student step split into
its scan calls, its BLAS products and the rest (``gated_rnn_parts``). Timed as ``minimal.bench.kernels`` times its
rows: one warm-up call, then rounds that time every row once (``best_of_interleaved``); one thread.
"""
from __future__ import annotations

import numpy as np

from ..validate import InputError, check_positive_int
from .kernels import DEFAULT_REPEATS, best_of_interleaved

__all__ = ["bench_step", "gated_rnn_parts", "format_step_table"]


def bench_step(repeats=None, batch=64):
    """Forward + backward of the gated RNN (Zucchet Eq. 2, float32, one BLAS thread) on the two tasks' shapes,
    timed interleaved (best of ``repeats`` rounds of 20 calls):

        teacher-student   B x T = 64 x 32, H = 100, output at every step (the loss reads every step)
        ICL, readout all  B x (T + 1) = 64 x 13, H = 80: y at every token, the query's kept
        ICL, readout last the same through ``readout="last"`` (output gating on h_T only, closed-form h_T)

    Returns one dict per row: name, seconds (per call), and for the ICL rows ``vs_all`` = (readout-all time) /
    (row time). The AdamW update and batch sampling are not included (``experiments.*`` report whole steps).
    "teacher-student, out=" is the same step with one reused buffer for the states (``gated_rnn.forward``'s
    ``out=``, as ``experiments.zucchet.teacher_student`` trains), ``vs_fresh`` = (fresh-array time) / (its time).
    Three more rows split the teacher-student step, each with ``share`` (its fraction of the step): its two scan
    calls, its 15 BLAS products (both replayed by ``gated_rnn_parts`` in the same rounds), and the rest
    (elementwise gating, the finiteness checks, Python), the step's time minus the two.
    """
    from ..run import speed
    from ..cells import gated_rnn
    from ..experiments.zucchet import icl, icl_params
    from ..tasks import icl_regression, lsa_teacher

    repeats = check_positive_int("repeats", DEFAULT_REPEATS if repeats is None else repeats)
    batch = check_positive_int("batch", batch)
    speed.tune()
    rng = np.random.default_rng(0)
    p_ts = {k: v.astype(np.float32) for k, v in gated_rnn.init(rng, 5, 100, 4, d_gate=100).items()}
    teacher = lsa_teacher.make_teacher(rng, 4)
    x_ts, y_ts = lsa_teacher.sample_batch(rng, teacher, batch, 32, dtype=np.float32)
    cfg = icl.Config(batch=batch)
    p_icl = icl_params.cell_params(icl_params.init_params(rng, cfg))
    tasks = icl_regression.sample(rng, batch, cfg.T, cfg.d_x, cfg.d_y, dtype=np.float32)

    h_ts = np.empty(x_ts.shape[:2] + p_ts["nu"].shape, dtype=np.float32)   # the states h, (B, T, H)

    def teacher_step(out=None):
        y, cache = gated_rnn.forward(p_ts, x_ts, out=out)
        gated_rnn.backward(p_ts, cache, lsa_teacher.mse(y, y_ts)[1])

    def icl_step(readout):
        y, cache = gated_rnn.forward(p_icl, tasks.tokens, readout=readout)
        _, dy_q = icl_regression.query_loss(y[:, -1], tasks.y_q)
        dy = np.zeros_like(y)
        dy[:, -1] = dy_q
        gated_rnn.backward(p_icl, cache, dy)

    # Where the teacher-student step's time goes: the cell's two scan calls and its 15 weight products, replayed
    # on the step's own arrays (``gated_rnn_parts``), timed in the same rounds; the rest is the remainder.
    y, cache = gated_rnn.forward(p_ts, x_ts)
    parts = gated_rnn_parts(p_ts, cache, lsa_teacher.mse(y, y_ts)[1])

    calls = 20
    cases = [("teacher-student", teacher_step), ("ICL, readout all", lambda: icl_step("all")),
             ("ICL, readout last", lambda: icl_step("last")),
             ("teacher-student, out=", lambda: teacher_step(h_ts)),
             ("  of which scans", lambda: [fn() for fn in parts["scans"].values()]),
             ("  of which BLAS matmuls", lambda: [fn() for fn in parts["matmuls"].values()])]
    fns = [(lambda f=f: [f() for _ in range(calls)]) for _, f in cases]
    rows = [{"name": name, "seconds": t / calls} for (name, _), t in zip(cases, best_of_interleaved(fns, repeats))]
    for r in rows[1:3]:
        r["vs_all"] = rows[1]["seconds"] / r["seconds"]
    rows[3]["vs_fresh"] = rows[0]["seconds"] / rows[3]["seconds"]
    step = rows[0]["seconds"]
    rest = step - rows[4]["seconds"] - rows[5]["seconds"]
    rows.append({"name": "  of which the rest", "seconds": rest})
    for r in rows[4:]:
        r["share"] = r["seconds"] / step
    return rows


def gated_rnn_parts(params, cache, dy):
    """The gated RNN's scan calls and BLAS products (Zucchet Eq. 2, ``cells.gated_rnn``, diagonal recurrence,
    readout "all") as zero-argument functions on one step's arrays, for ``bench_step``'s breakdown.

    Args:
        params, cache: ``gated_rnn.forward``'s parameters and cache; dy: (B, T, D_out) dL/dy.
    Returns:
        {"scans": {name: fn}, "matmuls": {name: fn}}: the forward's ``linear_scan`` and the backward's
        ``linear_scan_backward`` (as the cell calls them), and the 15 weight products of forward + backward, each
        returning the product the cell computes (the tests compare them with ``forward`` / ``backward``). The
        operands are formed here, outside the functions, so each times the one call.
    """
    from .. import scan

    if cache.readout != "all" or "nu" not in params:
        raise InputError(f"gated_rnn_parts needs a cache of the diagonal recurrence with readout='all' (the one "
                         f"the training step runs), got readout {cache.readout!r}, params {sorted(params)}")
    x, p, q, lam, h, r, s = cache.x, cache.p, cache.q, cache.lam, cache.h, cache.r, cache.s
    kw = {"method": cache.method, "backend": cache.backend}    # the cell's own call
    B, T, H = h.shape
    flat = (lambda z: z.reshape(B * T, z.shape[-1]))
    xf, hf, rsf, dyf = flat(x), flat(h), flat(r * s), flat(dy)
    W = params
    a = np.broadcast_to(lam.astype(h.dtype), h.shape).copy()
    b = p * q
    do = dyf @ W["D"]
    dr, ds = do * flat(s), do * flat(r)
    dh = (dr @ W["W_out_m"] + ds @ W["W_out_x"]).reshape(h.shape)
    db = scan.linear_scan_backward(a, h, dh, **kw)[1]
    dp, dq = flat(db * q), flat(db * p)
    scans = {"linear_scan": lambda: scan.linear_scan(a, b, **kw),
             "linear_scan_backward": lambda: scan.linear_scan_backward(a, h, dh, **kw)}
    matmuls = {
        "p": lambda: xf @ W["W_in_m"].T, "q": lambda: xf @ W["W_in_x"].T,
        "r": lambda: hf @ W["W_out_m"].T, "s": lambda: hf @ W["W_out_x"].T, "y": lambda: rsf @ W["D"].T,
        "dD": lambda: dyf.T @ rsf, "do": lambda: dyf @ W["D"],
        "dW_out_m": lambda: dr.T @ hf, "dW_out_x": lambda: ds.T @ hf,
        "dh_m": lambda: dr @ W["W_out_m"], "dh_x": lambda: ds @ W["W_out_x"],
        "dW_in_m": lambda: dp.T @ xf, "dW_in_x": lambda: dq.T @ xf,
        "dx_m": lambda: dp @ W["W_in_m"], "dx_x": lambda: dq @ W["W_in_x"],
    }
    return {"scans": scans, "matmuls": matmuls}


def format_step_table(rows):
    """A plain-text table of ``bench_step``'s rows."""
    lines = [f"{'gated RNN forward + backward':<30} {'ms':>8} {'vs readout all':>15} {'of step':>8}", "-" * 64]
    for r in rows:
        ratio = f"{r['vs_all']:.2f}x" if "vs_all" in r else f"{r['vs_fresh']:.2f}x fresh" if "vs_fresh" in r else ""
        share = f"{100 * r['share']:.0f}%" if "share" in r else ""
        lines.append(f"{r['name']:<30} {1e3 * r['seconds']:>8.3f} {ratio:>15} {share:>8}")
    if any("share" in r for r in rows):
        lines.append("-" * 64)
        lines.append("teacher-student split: the cell's scan calls and its 15 BLAS products replayed on the step's "
                     "arrays; the rest (elementwise gates, checks, Python) is the remainder")
    return "\n".join(lines)
