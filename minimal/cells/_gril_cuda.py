"""The GRIL block on the GPU (``minimal.cells.gril``, backend="cuda"): the calls into ``cuda_kernels.window``.
Private: call it through ``gril.forward`` / ``gril.backward``, which check the arguments and keep the cache.

The forward is that module's fused kernel (one thread per entry of Z, f <= 32) or its unfused one (``fused``);
the backward is that module's default. x and the states Z go to the device once and stay there from the forward
to the backward; o, dx and the gradients come back as NumPy arrays. The params must have x's dtype (the kernels do
not cast). Glossary: B batch, T input steps, f features, w window width, s stride, T' windows.
"""
from __future__ import annotations

from ..scan.checks import cuda_module
from ..validate import check_array

__all__ = ["gril_forward", "gril_backward"]


def _device_params(win, params):
    return [win.to_device(params[k]) for k in ("Q", "q", "beta", "A")]


def gril_forward(params, x, s, w, fused):
    """Parallel mode on the GPU: o (B, T', f) on the host; Z (B, T', f, f) and x (B, T, f) on the device."""
    win = cuda_module("window")
    x_d = win.to_device(x)
    o, Z = win.gril_forward(x_d, *_device_params(win, params), w, s, fused=fused, return_Z=True)
    return o.copy_to_host(), Z, x_d


def gril_backward(params, x_d, s, Z, do):
    """Gradients from the device copies of x and Z that ``gril_forward`` kept: dx (B, T, f) and {Q, q, beta, A}."""
    win = cuda_module("window")
    B, T_out, f, _ = Z.shape
    check_array("do", do, (B, T_out, f), names=("B", "T'", "f"))
    dx, grads = win.gril_backward(x_d, *_device_params(win, params), params["Q"].shape[0], s, Z, win.to_device(do))
    return dx.copy_to_host(), {k: grads[k].copy_to_host() for k in params}
