"""GRIL's windowed cross-product block on the GPU: the host side (arguments, plans, launches).

Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"
(arXiv:2410.11687, Def. 4.2), with the conventions of ``minimal.cells.gril``:

    C_k = [x_{ks}, ..., x_{ks+w-1}]     (f, w)   C_k[i, m] = x[k s + m, i]; column w-1 is the newest token
    U_k = C_k Q C_k^T                   (f, f)
    Z_k = A ⊙ Z_{k-1} + U_k, Z_{-1} = 0  (f, f)
    o_k = β ⊙ (Z_k r_k),  r_k = C_k q    (f,)     β is (1,) (scalar) or (f,)

Windows start only when full, k = 0 .. T'-1 with T' = (T - w) / s + 1, and (T - w) % s == 0 is required: the
count and its errors are the library's ``minimal.cells.gril.n_windows``, imported here (one definition).
Glossary: B batch, T input steps, f features, w window width, s stride, T' windows.

The kernels live by direction, each version with its docstring of what it adds:

    ``window_forward.py``   forward v1 unfused (updates, Blelloch scan over windows, readout), v2 fused (one
                            block per batch element), v3 segmented (T split across blocks, reduce-then-scan)
    ``window_backward.py``  backward v1 elementwise (atomic adds), v2 fused (forward v3's segments, no atomics)

``gril_forward(version=)`` and ``gril_backward(version=)`` pick one. Defaults: forward v3 and backward v2 when
f <= 32 (one thread per entry of Z), else v1. v3 with one segment runs v2's single pass, so the default keeps
v2's structure where B alone fills the GPU and splits T where it does not (``plan_segments``).
``fused=False`` / ``fused=True`` (the older switch) still select v1 / a fused version.

On an H200 (2026-11-26) forward v3 and backward v2 passed the hardware tests of ``tests/test_cuda_window.py``
and were timed at f = 10, 16, 32 (``bench/results/gpu_check_H200_2026-11-26_window_rows.jsonl``: forward
0.02-0.14 of a copy of the same bytes, backward 3.3-8.0x its forward); ``TARGET_THREADS`` and ``MIN_SEGMENT``
are not tuned.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from minimal.cells.gril import n_windows

from ._device import NB_TYPES
from .arrays import check_out, is_device, to_device
from .scan import linear_scan, linear_scan_backward
from .window_backward import elementwise_backward, segmented_backward
from .window_forward import DEFAULT_BLOCK, elementwise_forward, fused_kernel, segmented_forward
from .workspace import alloc, check_workspace

__all__ = ["gril_forward", "gril_backward", "plan_segments", "to_device", "DEFAULT_BLOCK",
           "FORWARD_VERSIONS", "BACKWARD_VERSIONS", "TARGET_THREADS", "MIN_SEGMENT"]

FORWARD_VERSIONS = (1, 2, 3)
BACKWARD_VERSIONS = (1, 2)
# How far the segmented kernels split T (``plan_segments``). Not tuned on a GPU: TARGET_THREADS is the
# resident-thread count of an H100 (132 SMs x 2048 = 270336, rounded to 2^18); MIN_SEGMENT keeps the extra
# work of reduce-then-scan (pass 1, and the backward's halo windows) small next to a segment's own.
TARGET_THREADS = 2 ** 18
MIN_SEGMENT = 32


def _check(x, Q, q, beta, A, w, s, extra=()):
    """Validate shapes, dtypes and placement; returns (on_device, (B, T, f, w, T'))."""
    named = [("x", x), ("Q", Q), ("q", q), ("beta", beta), ("A", A)] + list(extra)
    on_device = is_device(x)
    for name, v in named:
        if not (isinstance(v, np.ndarray) or is_device(v)):
            raise ValueError(f"{name} must be a numpy.ndarray or a CUDA device array, got {type(v).__name__}")
        if is_device(v) != on_device:
            raise ValueError(f"{name} must live where x does ({'device' if on_device else 'host'})")
        if np.dtype(v.dtype) not in NB_TYPES:
            raise ValueError(f"{name} must have dtype float32 or float64, got {v.dtype}")
        if v.dtype != x.dtype:
            raise ValueError(f"{name} must have the dtype of x ({x.dtype}), got {v.dtype}")
    if len(x.shape) != 3:
        raise ValueError(f"x must have shape (B, T, f), got {tuple(x.shape)}")
    B, T, f = x.shape
    T_out = n_windows(T, w, s)
    want = {"Q": (w, w), "q": (w,), "A": (f, f)}
    for name, v in named[1:5]:
        if name == "beta":
            if tuple(v.shape) not in ((1,), (f,)):
                raise ValueError(f"beta must have shape (1,) or (f,) = ({f},), got {tuple(v.shape)}")
        elif tuple(v.shape) != want[name]:
            raise ValueError(f"{name} must have shape {want[name]} (w = {w}, f = {f}), got {tuple(v.shape)}")
    return on_device, (B, T, f, w, T_out)


def _grid(n, block=DEFAULT_BLOCK):
    return max(1, -(-n // block)), block


def _zeros(shape, dtype, y=None):
    """A device array of zeros (y itself, zeroed, if given)."""
    y = cuda.device_array(shape, dtype=dtype) if y is None else y
    elementwise_backward(dtype).zero[_grid(y.size)](y.reshape(y.size))
    return y


def _is_int(v):
    """An int or NumPy integer, not a bool (True == 1) and not a float (3.0 == 3)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_int(name, v, lo, hi, what):
    if not _is_int(v) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}] ({what}), got {v!r}")
    return int(v)


def plan_segments(B, T_out, f, segments=None):
    """(n_seg, L): the T' windows cut into n_seg segments of L windows (the last one may be shorter).

    segments=None: as many segments as bring the grid to ``TARGET_THREADS`` threads (B * n_seg blocks of f*f
    threads), but no segment shorter than ``MIN_SEGMENT`` windows; one segment (the single pass) when B alone
    is enough. An integer asks for that many; n_seg = ceil(T' / L) with L = ceil(T' / segments) can be
    smaller (T' = 10, segments = 4: L = 3 and n_seg = 4; segments = 6: L = 2 and n_seg = 5).
    """
    if segments is None:
        n = max(1, min(-(-TARGET_THREADS // (B * f * f)), T_out // MIN_SEGMENT))
    else:
        n = _check_int("segments", segments, 1, T_out, f"segments of the T' = {T_out} windows")
    L = -(-T_out // n)
    return -(-T_out // L), L


def _fits_fused(f):
    if f * f > 1024:
        raise ValueError(f"x must have f <= 32 features for the fused kernels (one thread per entry of Z), "
                         f"got f={f}; use version=1")


def _forward_version(version, fused, segments, f):
    """The forward's version from ``version``, ``fused`` (the older switch) and ``segments``."""
    if fused is not None and not isinstance(fused, (bool, np.bool_)):
        raise ValueError(f"fused must be True, False or None, got {fused!r}")
    if version is None:
        version = 1 if fused is False or (fused is None and f * f > 1024) else 3
    elif not _is_int(version) or version not in FORWARD_VERSIONS:
        raise ValueError(f"version must be 1 (unfused), 2 (fused, one block per batch element) or 3 (fused, "
                         f"T split into segments), got {version!r}")
    elif fused is not None and bool(fused) != (version != 1):
        raise ValueError(f"fused={fused} contradicts version={version} (version 1 is the unfused one)")
    if segments is not None and version != 3:
        raise ValueError(f"segments applies to version=3 only, got segments={segments!r} with version={version}")
    if version != 1:
        _fits_fused(f)
    return version


def gril_forward(x, Q, q, beta, A, w, s, *, version=None, fused=None, segments=None, return_Z=False,
                 scan_block=None, out=None, workspace=None):
    """The GRIL block on the GPU: o_k = β ⊙ (Z_k C_k q), Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T.

    Args:
        x: (B, T, f) float32 or float64; Q: (w, w); q: (w,); beta: (1,) or (f,); A: (f, f), one dtype;
            NumPy or device arrays (results go where x is).
        w: window width (= Q's size); s: stride, with w <= T and (T - w) % s == 0.
        version: 1 unfused (updates, Blelloch scan, readout), 2 fused (one block per batch element),
            3 fused with T split into segments (module docstring). None: 3 when f <= 32, else 1.
        fused: the older switch, kept working: False is version 1, True a fused version (3 unless version
            says 2); it must agree with ``version`` when both are given.
        segments: version 3 only: how many segments to cut the windows into (``plan_segments``); None picks
            the number from ``TARGET_THREADS``, and 1 is v2's single pass.
        return_Z: also return the states Z (B, T', f, f), which ``gril_backward`` needs.
        scan_block: threads per block of the Blelloch scans (v1's scan over windows, v3's scan over segment
            totals); ``cuda_kernels.scan``'s default if None.
        out: device arrays to write the results into (inputs on the device): o, or (o, Z) with return_Z;
            None: fresh arrays.
        workspace: a ``cuda_kernels.scan.Workspace`` for the temporaries (U, the segment totals), or None.
    Returns:
        o: (B, T', f), o[:, k] belongs to input step k s + w - 1; or (o, Z) if return_Z.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s)
    version = _forward_version(version, fused, segments, f)
    names, shapes = (("o", "Z"), ((B, T_out, f), (B, T_out, f, f))) if return_Z else (("o",), ((B, T_out, f),))
    outs = check_out(out, names, shapes, x.dtype, on_device)
    check_workspace(workspace)
    xd, Qd, qd, betad, Ad = (to_device(v) for v in (x, Q, q, beta, A))
    o = cuda.device_array((B, T_out, f), dtype=x.dtype) if outs is None else outs[0]
    kw = {} if scan_block is None else {"block": scan_block}
    kw["workspace"] = workspace
    Z_given = None if outs is None or not return_Z else outs[1].reshape((B, T_out, f * f))
    if version == 1:
        ker = elementwise_forward(x.dtype)
        U = alloc(workspace, "U", (B, T_out, f * f), x.dtype)
        ker.updates[_grid(U.size)](xd, Qd, s, U)
        a = alloc(workspace, "A rows", (B, T_out, f * f), x.dtype)
        ker.fill_rows[_grid(a.size)](Ad, a)
        Z = Z_given if Z_given is not None else alloc(None if return_Z else workspace, "Z", a.shape, x.dtype)
        linear_scan(a, U, None, "blelloch", out=Z, **kw)
        ker.readout[_grid(o.size)](xd, qd, betad, Z, s, o)
    else:
        if Z_given is not None:
            Z = Z_given
        elif return_Z:
            Z = cuda.device_array((B, T_out, f * f), dtype=x.dtype)
        else:
            Z = alloc(workspace, "unused3", (1, 1, 1), x.dtype)
        if version == 2:
            fused_kernel(x.dtype, f, w)[B, f * f](xd, Qd, qd, betad, Ad, s, return_Z, o, Z)
        else:
            n_seg, L = plan_segments(B, T_out, f, segments)
            ker = segmented_forward(x.dtype, f, w)
            S = alloc(workspace, "unused3", (1, 1, 1), x.dtype)
            if n_seg > 1:
                # 1. each segment's own end state; 2. S[b, g] = A^L ⊙ S[b, g - 1] + Zloc[b, g], the state
                # after segment g; 3. (below) every segment rerun from the state before it.
                Zloc = alloc(workspace, "Zloc", (B, n_seg, f * f), x.dtype)
                ker.reduce[B * n_seg, f * f](xd, Qd, Ad, s, L, Zloc)
                a = alloc(workspace, "A^L", (B, n_seg, f * f), x.dtype)
                ker.fill_power[_grid(a.size)](Ad, L, a)
                S = linear_scan(a, Zloc, None, "blelloch", out=alloc(workspace, "S", a.shape, x.dtype), **kw)
            ker.scan[B * n_seg, f * f](xd, Qd, qd, betad, Ad, s, L, S, n_seg > 1, return_Z, o, Z)
    if outs is not None:
        return outs if return_Z else outs[0]
    res = (o, Z.reshape((B, T_out, f, f))) if return_Z else (o,)
    res = res if on_device else tuple(v.copy_to_host() for v in res)
    return res if return_Z else res[0]


def gril_backward(x, Q, q, beta, A, w, s, Z, do, *, version=None, segments=None, scan_block=None, out=None,
                  workspace=None):
    """Gradients of ``gril_forward`` (numbered steps in the module docstring).

    Args:
        x, Q, q, beta, A, w, s: as in ``gril_forward``.
        Z: (B, T', f, f) the forward's states (``return_Z=True``, any forward version); do: (B, T', f) dL/do.
        version: 1 (elementwise kernels, the reverse Blelloch scan, atomic adds) or 2 (fused: one block per
            (b, segment), no atomics, deterministic). None: 2 when f <= 32, else 1.
        segments: version 2 only, as in ``gril_forward`` (``plan_segments``).
        scan_block: threads per block of the Blelloch scans (v1's, and v2's over segment totals).
        out: (dx, {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}) device arrays to write the results into (inputs
            on the device), or None.
        workspace: a ``cuda_kernels.scan.Workspace`` for the temporaries, or None.
    Returns:
        dx (B, T, f) and {"Q": (w, w), "q": (w,), "beta": beta's shape, "A": (f, f)}, where x is.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s, [("Z", Z), ("do", do)])
    if tuple(Z.shape) != (B, T_out, f, f):
        raise ValueError(f"Z must have shape (B, T', f, f) = {(B, T_out, f, f)}, got {tuple(Z.shape)}")
    if tuple(do.shape) != (B, T_out, f):
        raise ValueError(f"do must have shape (B, T', f) = {(B, T_out, f)}, got {tuple(do.shape)}")
    if version is None:
        version = 2 if f * f <= 1024 else 1
    elif not _is_int(version) or version not in BACKWARD_VERSIONS:
        raise ValueError(f"version must be 1 (elementwise, atomic adds) or 2 (fused, T split into segments), "
                         f"got {version!r}")
    if segments is not None and version != 2:
        raise ValueError(f"segments applies to version=2 only, got segments={segments!r} with version={version}")
    if version == 2:
        _fits_fused(f)
    dt = x.dtype
    outs = None
    if out is not None:
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[1], dict)
                and set(out[1]) == {"Q", "q", "beta", "A"}):
            raise ValueError('out must be (dx, {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}) device arrays, got '
                             f"{type(out).__name__}")
        outs = check_out((out[0],) + tuple(out[1][k] for k in ("Q", "q", "beta", "A")),
                          ("dx", "Q", "q", "beta", "A"), ((B, T, f), (w, w), (w,), tuple(beta.shape), (f, f)),
                          dt, on_device)
    check_workspace(workspace)
    xd, Qd, qd, betad, Ad, Zd, dod = (to_device(v) for v in (x, Q, q, beta, A, Z, do))
    Zd = Zd.reshape((B, T_out, f * f))
    kw = {} if scan_block is None else {"block": scan_block}
    kw["workspace"] = workspace
    if outs is None:
        outs = (cuda.device_array((B, T, f), dtype=dt), cuda.device_array((w, w), dtype=dt),
                cuda.device_array((w,), dtype=dt), cuda.device_array(tuple(beta.shape), dtype=dt),
                cuda.device_array((f, f), dtype=dt))
    dx, dQ, dq, dbeta, dA = outs
    if version == 2:
        n_seg, L = plan_segments(B, T_out, f, segments)
        ker, fill_power = segmented_backward(dt, f, w), segmented_forward(dt, f, w).fill_power
        Gs = alloc(workspace, "unused3", (1, 1, 1), dt)
        if n_seg > 1:
            # 1. each segment's own G at its first window; 2. Gs[b, g] = Gloc[b, g] + A^L ⊙ Gs[b, g + 1],
            # the full adjoint at segment g's first window (the reverse scan; its h argument only feeds the
            # dL/da that is not used); 3. (below) every segment rerun from Gs[b, g + 1].
            Gloc = alloc(workspace, "Gloc", (B, n_seg, f * f), dt)
            ker.reduce_backward[B * n_seg, f * f](xd, qd, betad, Ad, dod, s, L, Gloc)
            a = alloc(workspace, "A^L", (B, n_seg, f * f), dt)
            fill_power[_grid(a.size)](Ad, L, a)
            scan_out = tuple(alloc(workspace, name, sh, dt) for name, sh in
                             (("dA^L", a.shape), ("Gs", a.shape), ("dh0 unused", (B, f * f))))
            _, Gs, _ = linear_scan_backward(a, Gloc, Gloc, None, "blelloch", out=scan_out, **kw)
        P = alloc(workspace, "partials", (B * n_seg, f * f + w * w + w + beta.shape[0]), dt)
        ker.backward[B * n_seg, f * f](xd, Qd, qd, betad, Ad, Zd, dod, s, L, Gs, n_seg > 1, dx, P)
        ker.sum_partials[_grid(P.shape[1])](P, dA, dQ, dq, dbeta)
    else:
        _backward_v1(xd, Qd, qd, betad, Ad, Zd, dod, s, T, beta.shape, kw, outs)
    if out is not None:
        return out
    grads = {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}
    if on_device:
        return dx, grads
    return dx.copy_to_host(), {k: v.copy_to_host() for k, v in grads.items()}


def _backward_v1(xd, Qd, qd, betad, Ad, Zd, dod, s, T, beta_shape, kw, outs):
    """v1: elementwise kernels, the reverse Blelloch scan, atomic adds for the sums over windows, into
    outs = (dx, dQ, dq, dbeta, dA)."""
    B, T_out, ff = Zd.shape
    f, w = xd.shape[2], Qd.shape[0]
    dt = xd.dtype
    ker = elementwise_backward(dt)
    workspace = kw["workspace"]
    dx, dQ, dq, dbeta, dA = outs
    for y in (dx, dQ, dq, dbeta):  # sums of atomic adds start from 0
        _zeros(y.shape, dt, y)
    # 4. readout
    dZ = alloc(workspace, "dZ", (B, T_out, ff), dt)
    ker.readout_backward_rows[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dbeta, dZ)
    ker.readout_backward_cols[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dq, dx)
    # 3. the scan over windows: G = dL/dU, da = G ⊙ Z_{k-1}
    a = alloc(workspace, "A rows", (B, T_out, ff), dt)
    elementwise_forward(dt).fill_rows[_grid(a.size)](Ad, a)
    scan_out = tuple(alloc(workspace, name, sh, dt) for name, sh in
                     (("da", a.shape), ("G", a.shape), ("dh0 unused", (B, ff))))
    da, G, _ = linear_scan_backward(a, Zd, dZ, None, "blelloch", out=scan_out, **kw)
    ker.sum_over_windows[_grid(ff)](da, dA)
    # 2. U = C Q C^T, 1. scattered onto x
    ker.update_backward_x[_grid(B * T_out * f * w)](xd, Qd, G, s, dx)
    ker.update_backward_Q[_grid(B * T_out * w * w)](xd, G, s, dQ)
    return dx, dQ, dq, dbeta, dA
