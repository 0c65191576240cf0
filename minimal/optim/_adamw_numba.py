"""One AdamW update of one parameter array in one compiled pass (``minimal.optim.adamw_step``, the NumPy reference in ``__init__.py`` beside this file).

The same operations in the same order and the same dtype as ``adamw_step``'s NumPy lines (its scalars rounded to
the array's dtype first, as NumPy does with Python floats, and no fused multiply-add), so the results are
bit-identical; NumPy spends ~10 passes with temporaries and ~20 calls a parameter, which on the course's models
(35-45 arrays, 0.08-0.17 M numbers) cost more than the arithmetic. The pass also reports whether every input and
output is finite: z − z is 0 for a finite z and NaN for NaN or inf, so an OR over the elements of (z − z ≠ 0), z the
sum of the inputs and the sum of the outputs, is an integer reduction the loop vectorises. (Finite values whose sum
overflows read as not finite too: the step then runs the NumPy lines, which decide.) (A float sum of 0 · each
value, which the strict order of float additions kept scalar, made the pass many times slower:
``bench/results/train_cpu_2026-12-03_dropout_adamw_log32.txt``, section 2.)

``sum_of_squares`` is the clip's Σ g² of one array (``minimal.optim.global_norm``) in one pass, in float64, with no
float64 copy of a float32 array and none of NumPy's per-call wrappers (59 arrays a Shakespeare step).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["adamw_update", "sum_of_squares"]


@njit(cache=True, error_model="numpy")
def adamw_update(p, g, m, v, s, decay, new_p, new_m, new_v):
    """Flat (n,) arrays of one dtype; s = [β1, 1 − β1, β2, 1 − β2, c1, c2, ε, wd, lr] in that dtype; ``decay``:
    whether wd applies. Writes new_m, new_v, new_p; returns whether every input and output is finite."""
    bad = False
    for j in range(p.shape[0]):
        gj = g[j]
        mj = s[0] * m[j] + s[1] * gj
        vj = s[2] * v[j] + s[3] * (gj * gj)
        step = (mj / s[4]) / (np.sqrt(vj / s[5]) + s[6])
        if decay:
            step = step + s[7] * p[j]
        pj = p[j] - s[8] * step
        new_m[j] = mj
        new_v[j] = vj
        new_p[j] = pj
        z_in, z_out = gj + m[j] + v[j] + p[j], mj + vj + pj
        bad |= (z_in - z_in != 0.0) | (z_out - z_out != 0.0)
    return not bad


@njit(cache=True, fastmath={"reassoc"})
def sum_of_squares(a):
    """Σ a_j² of a flat (n,) array, each term and the sum in float64 (reassociated: vector partial sums)."""
    s = 0.0
    for j in range(a.shape[0]):
        x = np.float64(a[j])
        s += x * x
    return s
