"""The embedding's backward, dE[x_n] += dy_n over the N = B·T positions in order, as one compiled loop
(``minimal.layers.embedding``, ``token_position_embedding``). ``np.add.at`` does the same additions in the same order
(so the results are bit-identical) but through its generic unbuffered path, many times slower at the selective-copy
and Shakespeare shapes (timed once)."""
from __future__ import annotations

from numba import njit

__all__ = ["scatter_add_rows"]


@njit(cache=True)
def scatter_add_rows(dE, ids, dy):
    """dE (V, D) += rows of dy (N, D) at rows ids (N,) of dE, in the order n = 0 .. N-1."""
    for n in range(ids.shape[0]):
        r = ids[n]
        for d in range(dy.shape[1]):
            dE[r, d] += dy[n, d]
