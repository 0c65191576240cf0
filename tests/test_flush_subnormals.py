"""``minimal.run.speed.flush_subnormals``: with the FTZ and DAZ bits set, a subnormal float32 result is 0 and a
subnormal operand reads as 0, in NumPy, in a matrix product and in a Numba kernel; cleared, both are as IEEE says."""
import platform

import numpy as np
import pytest
from numba import njit

from minimal.run import speed

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the FTZ / DAZ bits are x86-64's MXCSR")


@njit
def _scale(x, c):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * c
    return out


@pytest.fixture
def restore_mxcsr():
    before = speed.subnormals_flushed()
    yield
    speed.flush_subnormals(before)


def test_flushed_subnormals_are_zero_and_cleared_ones_are_not(restore_mxcsr):
    tiny = np.finfo(np.float32).tiny                     # 1.2e-38, the smallest normal float32
    x = np.array([tiny / 4, 1e-30], np.float32)          # one subnormal operand, one normal
    assert speed.flush_subnormals(True) and speed.subnormals_flushed()
    assert np.array_equal(x * np.float32(1.5), np.array([0.0, 1.5e-30], np.float32))       # DAZ: read as 0
    assert np.float32(tiny) * np.float32(0.25) == 0.0                                       # FTZ: result 0
    small = np.full((4, 4), 1e-20, np.float32)
    assert np.array_equal(small @ small, np.zeros((4, 4), np.float32))                     # 4e-40: flushed
    assert np.array_equal(_scale(x, np.float32(1.5)), np.array([0.0, 1.5e-30], np.float32))
    assert speed.flush_subnormals(False) and not speed.subnormals_flushed()
    assert (x * np.float32(1.5))[0] == np.float32(tiny / 4) * np.float32(1.5) > 0
    assert np.float32(tiny) * np.float32(0.25) > 0
    assert np.all(small @ small > 0)
    assert _scale(x, np.float32(1.5))[0] > 0
