"""The projections every attention cell starts from, q_t = W_Q x_t, k_t = W_K x_t, v_t = W_V x_t (weights act on
column vectors: W_Q, W_K (D_k, D), W_V (D_v, D); x (B, T, D)), backward: step 0 of ``lsa`` (``softmax_attention`` does it as one stacked product)."""
from __future__ import annotations

import numpy as np

from ..validate import check_finite_result


def qkv_backward(params, x, dq, dk, dv, dy, grads=None):
    """dx (B, T, D) and the grads of W_Q, W_K, W_V (added to ``grads``, e.g. one holding W_O's) from dq, dk
    (B, T, D_k) and dv (B, T, D_v); an overflow anywhere in the grads is named with dy, x and the params."""
    grads = {} if grads is None else grads
    grads["W_Q"] = np.einsum("btk,btd->kd", dq, x)
    grads["W_K"] = np.einsum("btk,btd->kd", dk, x)
    grads["W_V"] = np.einsum("btv,btd->vd", dv, x)
    dx = dq @ params["W_Q"] + dk @ params["W_K"] + dv @ params["W_V"]
    check_finite_result("the gradients", (dx, *grads.values()), {"dy": dy, "x": x, **params})
    return dx, grads
