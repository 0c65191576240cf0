"""The polynomial a network computes, read off exactly; Zucchet et al., "Gated recurrent neural networks
discover attention" (ICML 2024; arXiv 2309.01775), Sec. 3.1, Table 1 ("polynomial distance").

Linear self-attention and the gated RNN of Eq. 2 are polynomials of their inputs. On one token (T = 1,
empty past) with the student's input x̃ = [x; 1]:

    LSA          y = W_V x (x^T W_K^T W_Q x)                                  homogeneous, degree 3 in x
    gated RNN    y = D ((W_out_m g) ⊙ (W_out_x g)),  g = (W_in_m x̃) ⊙ (W_in_x x̃)    degree <= 4 in x

We call this map x_t -> y_t the *instantaneous polynomial*. Its coefficients c ∈ R^{M x D_out} on the M
monomials x^e = Π_a x_a^{e_a}, |e| <= k, are recovered by least squares on N >= M random points: for a
polynomial of degree <= k the fit is exact up to rounding, and ``coefficients`` refuses (ValueError) a
function whose residual shows it is not such a polynomial. ``network_polynomial`` does the same for the
last output y_T of a length-T sequence, with all T d inputs as variables (T = 2 shows the memory terms).

Distance (Table 1): for each output i, ‖c_i − c*_i‖ / ‖c*_i‖ (c* the reference, e.g. the teacher), averaged
over outputs. Sec. 3.1 calls it "the normalized Euclidean distance between these coefficient vectors" averaged
over the outputs (Table 1's caption: "the L2 distance"); the paper does not say what it is normalised by. Our
reading: by the norm of the teacher's coefficients, so the number does not depend on the teacher's scale.

Glossary: n variables, k degree, M = C(n + k, k) monomials, D_out outputs, N sample points.
"""
from __future__ import annotations

import itertools
from math import comb
from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_positive_int

__all__ = ["Polynomial", "monomials", "design_matrix", "coefficients", "network_polynomial",
           "instantaneous_polynomial", "lsa_polynomial", "distance", "RESIDUAL_TOL"]

RESIDUAL_TOL = 1e-8  # max relative residual of an exact fit in float64 (rounding gives ~1e-13)


class Polynomial(NamedTuple):
    """Σ_m coef[m] x^{exponents[m]}: exponents (M, n) ints, coef (M, D_out)."""
    exponents: np.ndarray
    coef: np.ndarray

    def __call__(self, x):
        """Evaluate at x (N, n) -> (N, D_out)."""
        return design_matrix(x, self.exponents) @ self.coef

    def degree_part(self, k):
        """The (M_k, D_out) coefficients of the monomials of total degree exactly k."""
        return self.coef[self.exponents.sum(axis=1) == k]


def monomials(n, degree):
    """All exponent vectors e in N^n with |e| <= degree: (M, n), M = C(n + degree, degree); by degree, then
    lexicographically (descending) within a degree."""
    n = check_positive_int("n", n)
    degree = check_positive_int("degree", degree, minimum=0)
    rows = []
    for k in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(n), k):
            rows.append(np.bincount(np.array(combo, dtype=int), minlength=n))
    out = np.array(rows, dtype=int).reshape(-1, n)
    assert out.shape[0] == comb(n + degree, degree)
    return out


def design_matrix(x, exponents):
    """Φ[p, m] = Π_a x[p, a]^{exponents[m, a]}: (N, M) for x (N, n)."""
    check_array("x", x, (None, exponents.shape[1]), names=("N", "n"))
    return np.prod(x[:, None, :] ** exponents[None, :, :], axis=2)


def coefficients(f, n, degree, rng=None, oversample=3):
    """Exact monomial coefficients of a vector polynomial f of degree <= ``degree`` in n variables.

    Args:
        f: maps points (N, n) float64 to values (N, D_out).
        n: number of variables; degree: the maximal total degree k.
        rng: ``numpy.random.Generator`` for the sample points (default: seed 0).
        oversample: N = oversample * M points, uniform in [-1, 1]^n.
    Returns:
        ``Polynomial`` with exponents (M, n) and coef (M, D_out).
    Raises:
        ValueError: f is not a polynomial of degree <= ``degree`` (relative residual > RESIDUAL_TOL), or f's
            output does not have shape (N, D_out).
    """
    exps = monomials(n, degree)
    rng = np.random.default_rng(0) if rng is None else rng
    x = rng.uniform(-1.0, 1.0, size=(oversample * exps.shape[0], n))
    y = np.asarray(f(x), dtype=np.float64)
    check_array("f(x)", y, (x.shape[0], None), names=("N", "D_out"))
    phi = design_matrix(x, exps)
    coef = np.linalg.lstsq(phi, y, rcond=None)[0]
    scale = max(float(np.max(np.abs(y))), 1e-300)
    residual = float(np.max(np.abs(phi @ coef - y))) / scale
    if residual > RESIDUAL_TOL:
        raise ValueError(f"f is not a polynomial of degree <= {degree} in {n} variables: relative residual "
                         f"{residual:.3g} > {RESIDUAL_TOL} (degree must bound the true degree)")
    return Polynomial(exps, coef)


def network_polynomial(f, d, T=1, degree=4, rng=None):
    """Coefficients of a sequence model's last output y_T as a polynomial of all its inputs x_1..x_T.

    Args:
        f: maps x (N, T, d) to the last output (N, D_out).
        d: input features; T: sequence length; degree: the maximal total degree (4 for the gated RNN).
    Returns:
        ``Polynomial`` in the T d variables (x_1, ..., x_T) flattened time-major.
    """
    d = check_positive_int("d", d)
    T = check_positive_int("T", T)
    return coefficients(lambda z: f(z.reshape(z.shape[0], T, d)), T * d, degree, rng=rng)


def instantaneous_polynomial(f, d, degree=4, rng=None):
    """``network_polynomial`` with T = 1: the map x_t -> y_t of a network with an empty past."""
    return network_polynomial(f, d, T=1, degree=degree, rng=rng)


def lsa_polynomial(W_V, W_K, W_Q, degree=4):
    """The instantaneous polynomial of LSA, symbolically: y_i = Σ_{a,b,c} W_V[i,a] M[b,c] x_a x_b x_c with
    M = W_K^T W_Q. Coefficients of the monomials of degree != 3 are 0. W_V (D_v, d), W_K, W_Q (D_k, d)."""
    check_array("W_V", W_V, ndim=2, names=("D_v", "d"))
    d = W_V.shape[1]
    check_array("W_K", W_K, (None, d), names=("D_k", "d"))
    check_array("W_Q", W_Q, W_K.shape, names=("D_k", "d"))
    exps = monomials(d, degree)
    index = {tuple(e): m for m, e in enumerate(exps)}
    M = W_K.T @ W_Q
    coef = np.zeros((exps.shape[0], W_V.shape[0]))
    for a, b, c in itertools.product(range(d), repeat=3):
        e = np.bincount([a, b, c], minlength=d)
        coef[index[tuple(e)]] += W_V[:, a] * M[b, c]
    return Polynomial(exps, coef)


def distance(reference, other):
    """Mean over outputs i of ‖c_i − c*_i‖ / ‖c*_i‖, c* = ``reference``'s coefficients (same monomials)."""
    if not (isinstance(reference, Polynomial) and isinstance(other, Polynomial)):
        raise ValueError("reference and other must be Polynomial (from coefficients / network_polynomial)")
    if reference.exponents.shape != other.exponents.shape or np.any(reference.exponents != other.exponents):
        raise ValueError(f"other must use reference's monomials {reference.exponents.shape}, got "
                         f"{other.exponents.shape}")
    check_array("other.coef", other.coef, reference.coef.shape, names=("M", "D_out"))
    norms = np.linalg.norm(reference.coef, axis=0)
    if np.any(norms == 0):
        raise ValueError("reference has an output whose polynomial is 0; its relative distance is undefined")
    return float(np.mean(np.linalg.norm(other.coef - reference.coef, axis=0) / norms))
