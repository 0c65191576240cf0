"""Dropout's compiled pass (``minimal.layers._dropout_numba``) draws what NumPy's ``Generator.random`` draws on a
PCG64, bit for bit: the same masks, the same outputs, the same generator state afterwards (``dropout.numpy_pass``,
the NumPy lines, is its reference)."""
import math

import numpy as np
import pytest

from minimal.layers import _dropout_numba, dropout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (4,), (5,), (2, 7), (3, 5, 8), (16, 33, 9)])
@pytest.mark.parametrize("rate", [0.1, 0.5, 0.97])
def test_the_compiled_pass_draws_what_numpy_draws(dtype, shape, rate):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    for seed in (1, 2**70 + 12345):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(3):    # successive calls continue the stream
            y, cache = dropout.forward({}, x, rate, ours)
            y_ref, mask_ref = dropout.numpy_pass(x, rate, theirs)
            assert y.dtype == cache.mask.dtype == x.dtype and y.shape == x.shape
            np.testing.assert_array_equal(y, y_ref, strict=True)
            np.testing.assert_array_equal(cache.mask, mask_ref, strict=True)
            assert ours.bit_generator.state == theirs.bit_generator.state
        assert ours.random() == theirs.random()


def test_the_states_buffered_half_word_is_left_as_random_leaves_it():
    """An odd number of 32-bit draws leaves half a 64-bit word buffered; random() keeps it, and so does the pass
    (the bit generator's advance alone would drop it)."""
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    for g in (ours, theirs):
        g.integers(0, 2**31, size=3, dtype=np.uint32)
    assert ours.bit_generator.state["has_uint32"] == 1
    x = np.ones((6, 11), np.float32)
    np.testing.assert_array_equal(dropout.forward({}, x, 0.3, ours)[0], dropout.numpy_pass(x, 0.3, theirs)[0])
    assert ours.bit_generator.state == theirs.bit_generator.state
    assert ours.integers(0, 2**31, dtype=np.uint32) == theirs.integers(0, 2**31, dtype=np.uint32)


def test_a_draw_is_kept_exactly_when_its_53_bits_reach_the_threshold():
    """u = w53 2^-53 >= rate  <=>  w53 >= ceil(rate 2^53), for rates on and between the grid of u."""
    rng = np.random.default_rng(3)
    rates = [2.0**-53, 0.1, 0.5, 1 - 2.0**-53, *rng.random(200), *(rng.integers(1, 2**53, 50) * 2.0**-53)]
    for rate in rates:
        t = _dropout_numba.threshold(rate)
        assert t * 2.0**-53 >= rate > (t - 1) * 2.0**-53
        assert math.ldexp(t, -53) == t * 2.0**-53   # exact: t <= 2^53


def test_other_bit_generators_take_the_numpy_lines(monkeypatch):
    def refuse(*args):
        raise AssertionError("the PCG64 pass ran")

    monkeypatch.setattr(_dropout_numba, "dropout_pcg64", refuse)
    x = np.random.default_rng(0).standard_normal((4, 9))
    for bits in (np.random.Philox, np.random.PCG64DXSM, np.random.SFC64):
        y, cache = dropout.forward({}, x, 0.25, np.random.Generator(bits(7)))
        np.testing.assert_array_equal(y, dropout.numpy_pass(x, 0.25, np.random.Generator(bits(7)))[0])
    with pytest.raises(AssertionError, match="PCG64 pass"):
        dropout.forward({}, x, 0.25, 7)


def test_a_strided_input_gives_the_numpy_result():
    x = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)[:, ::3]
    y, cache = dropout.forward({}, x, 0.4, np.random.default_rng(9))
    y_ref, mask_ref = dropout.numpy_pass(x, 0.4, np.random.default_rng(9))
    np.testing.assert_array_equal(y, y_ref, strict=True)
    np.testing.assert_array_equal(cache.mask, mask_ref, strict=True)


def test_a_draw_equal_to_the_rate_is_kept_as_numpy_keeps_it():
    """u >= rate keeps u = rate: rates set to drawn numbers themselves (and to their neighbours) give NumPy's mask."""
    u = np.random.default_rng(11).random(64)
    x = np.ones(64, np.float32)
    for k in (0, 5, 63):
        for rate in (u[k], np.nextafter(u[k], 0.0), np.nextafter(u[k], 1.0)):
            y, cache = dropout.forward({}, x, float(rate), np.random.default_rng(11))
            want = dropout.numpy_pass(x, float(rate), np.random.default_rng(11))[1]
            np.testing.assert_array_equal(cache.mask, want)
            if rate == u[k]:
                assert cache.mask[k] > 0
