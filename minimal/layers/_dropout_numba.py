"""Inverted dropout's training forward (``minimal.layers.dropout``) in one compiled pass that draws its own mask:
the same uniform numbers as NumPy's ``Generator.random`` on a PCG64 bit generator, bit for bit, so the masks, the
generator's state afterwards and every training run are those of the NumPy reference.

PCG64 (O'Neill 2014's permuted congruential generator in its XSL RR 128/64 form, NumPy's ``PCG64``) holds a 128-bit
state s and an odd increment c; each draw steps s <- a s + c mod 2^128 (a the 128-bit multiplier ``_A``) and
outputs the 64-bit word of the new state

    w = rotr64(hi(s) xor lo(s), hi(s) >> 58),

which ``Generator.random`` turns into u = (w >> 11) 2^-53 in [0, 1). Dropout keeps an element when u >= rate
(``dropout.forward``); since (w >> 11) is an integer and rate 2^53 is exact in float64, that is
(w >> 11) >= ceil(rate 2^53) (``threshold``), an integer comparison with no conversion.

Why compiled: NumPy steps the state once per element, and each step waits for the 128-bit product of the one before.
Four lanes here each hold every fourth state and step it four draws at once, s <- A s + C with A = a^4 and
C = c (a^3 + a^2 + a + 1) mod 2^128: four independent chains of products the core overlaps, and the comparison,
the mask and y = x · mask are written in the same pass (NumPy: a float64 draw, a comparison, a cast, two products).
``advance`` of the bit generator then moves its state by the number of draws, as ``Generator.random`` would have.
Shapes: x, y and mask flat and contiguous, of one dtype.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["LANES", "threshold", "dropout_pcg64", "dropout_pcg64_into"]

LANES = 4
_A = 0x2360ED051FC65DA44385DF649FCCF645   # PCG64's multiplier (NumPy's pcg64.h: PCG_DEFAULT_MULTIPLIER_HIGH, _LOW)
_M128 = (1 << 128) - 1
_M64 = (1 << 64) - 1


@intrinsic
def _mulhi(typingctx, x, y):
    """The high 64 bits of the 128-bit product of two uint64 (one multiply instruction)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128 = ir.IntType(128)
        p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
        return builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))

    return sig, codegen


@njit(cache=True, inline="always")
def _word53(hi, lo):
    """w >> 11 of the state (hi, lo): the 53 bits ``Generator.random`` scales by 2^-53."""
    xs = hi ^ lo
    r = hi >> np.uint64(58)
    return ((xs >> r) | (xs << ((np.uint64(64) - r) & np.uint64(63)))) >> np.uint64(11)


@njit(cache=True, inline="always")
def _affine(hi, lo, A_hi, A_lo, C_hi, C_lo):
    """(A s + C) mod 2^128 of s = (hi, lo), as (hi, lo)."""
    new_lo = lo * A_lo + C_lo   # wraps mod 2^64; the carry of + C_lo is new_lo < C_lo
    new_hi = _mulhi(lo, A_lo) + hi * A_lo + lo * A_hi + C_hi + (np.uint64(1) if new_lo < C_lo else np.uint64(0))
    return new_hi, new_lo


@njit(cache=True, inline="always")
def _keep(x, y, mask, k, hi, lo, thr, scale, zero):
    m = scale if _word53(hi, lo) >= thr else zero
    mask[k] = m
    y[k] = x[k] * m


@njit(cache=True)
def dropout_pcg64_into(x, y, mask, thr, scale, hi, lo, A_hi, A_lo, C_hi, C_lo):
    """y = x ⊙ mask, mask_k = scale where draw k's (w >> 11) >= thr, else 0; draw k from the state hi[k % 4],
    lo[k % 4] of its lane (the state after k + 1 steps), each lane stepped by (A, C) (module docstring)."""
    n = x.size
    zero = x.dtype.type(0.0)
    h0, l0, h1, l1, h2, l2, h3, l3 = hi[0], lo[0], hi[1], lo[1], hi[2], lo[2], hi[3], lo[3]
    k = 0
    while k + 4 <= n:
        _keep(x, y, mask, k, h0, l0, thr, scale, zero)
        _keep(x, y, mask, k + 1, h1, l1, thr, scale, zero)
        _keep(x, y, mask, k + 2, h2, l2, thr, scale, zero)
        _keep(x, y, mask, k + 3, h3, l3, thr, scale, zero)
        h0, l0 = _affine(h0, l0, A_hi, A_lo, C_hi, C_lo)
        h1, l1 = _affine(h1, l1, A_hi, A_lo, C_hi, C_lo)
        h2, l2 = _affine(h2, l2, A_hi, A_lo, C_hi, C_lo)
        h3, l3 = _affine(h3, l3, A_hi, A_lo, C_hi, C_lo)
        k += 4
    if k < n:
        _keep(x, y, mask, k, h0, l0, thr, scale, zero)
    if k + 1 < n:
        _keep(x, y, mask, k + 1, h1, l1, thr, scale, zero)
    if k + 2 < n:
        _keep(x, y, mask, k + 2, h2, l2, thr, scale, zero)


def threshold(rate):
    """ceil(rate 2^53): u = (w >> 11) 2^-53 >= rate exactly when (w >> 11) >= it (module docstring)."""
    return math.ceil(rate * 2.0 ** 53)


def _split(v):
    return np.uint64(v >> 64), np.uint64(v & _M64)


def dropout_pcg64(x, rate, gen):
    """(y, mask) of ``dropout.forward`` for x (float32 or float64, any shape) and rate in (0, 1), the mask drawn
    from ``gen`` (a Generator on a PCG64) exactly as ``gen.random(x.shape) >= rate`` would, and ``gen`` advanced
    by x.size draws."""
    bg = gen.bit_generator
    xf = np.ascontiguousarray(x).reshape(-1)
    y, mask = np.empty_like(xf), np.empty_like(xf)
    with bg.lock:
        saved = bg.state
        s, c = saved["state"]["state"], saved["state"]["inc"]
        hi, lo = np.empty(LANES, np.uint64), np.empty(LANES, np.uint64)
        A, C = 1, 0
        for j in range(LANES):            # lane j starts at the state after j + 1 steps; (A, C): 4 steps at once
            s = (_A * s + c) & _M128
            hi[j], lo[j] = _split(s)
            A, C = (_A * A) & _M128, (_A * C + c) & _M128
        dropout_pcg64_into(xf, y, mask, np.uint64(threshold(rate)), x.dtype.type(1.0 / (1.0 - rate)), hi, lo,
                           *_split(A), *_split(C))
        bg.advance(xf.size)
        state = bg.state   # advance clears the buffered 32-bit half-word, which random() leaves as it was
        bg.state = state | {"has_uint32": saved["has_uint32"], "uinteger": saved["uinteger"]}
    return y.reshape(x.shape), mask.reshape(x.shape)
