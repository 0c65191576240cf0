"""Test configuration. The CUDA simulator must be switched on before numba is first imported."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import _cudasim  # noqa: E402

if numba.config.ENABLE_CUDASIM:
    _cudasim.apply()   # the simulator's shared-array allocation is racy; see tests/_cudasim.py


@pytest.fixture
def rng():
    return np.random.default_rng(0)
