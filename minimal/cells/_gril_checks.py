"""The GRIL block's argument checks (``minimal.cells.gril``): the params of each readout, a window step's arrays and
those of ``gril.states``. Each raises a ValueError (InputError) that names the argument; none computes anything.
Private: ``gril`` calls them before it runs a path."""
from __future__ import annotations

from collections.abc import Mapping

from ..validate import InputError, check_array, check_dtype, common_dtype

__all__ = ["PARAM_NAMES", "READOUTS", "check_readout", "check_Q_and_A", "check_params", "check_step", "check_states"]

PARAM_NAMES = {"window": frozenset({"Q", "q", "beta", "A"}), "state": frozenset({"Q", "u", "beta", "A"})}
READOUTS = tuple(PARAM_NAMES)


def check_readout(value):
    """``value`` if it is one of READOUTS."""
    if value not in READOUTS:
        raise InputError(f"readout must be one of {list(READOUTS)}, got {value!r}")
    return value


def check_Q_and_A(Q, A):
    """(f, w) of A (f, f) and Q (w, w)."""
    f = check_array("A", A, ndim=2, names=("f", "f")).shape[0]
    check_array("A", A, (f, f), names=("f", "f"))
    w = check_array("Q", Q, ndim=2, names=("w", "w")).shape[0]
    check_array("Q", Q, (w, w), names=("w", "w"))
    return f, w


def check_params(p, readout=None):
    """(f, w) of the params ``p``, whose keys are those of ``readout`` (None: u or q decides); one dtype, A's."""
    if readout is None:
        readout = "state" if isinstance(p, Mapping) and "u" in p else "window"
    names = PARAM_NAMES[readout]
    if not isinstance(p, Mapping) or set(p) != names:
        got = sorted(p) if isinstance(p, Mapping) else type(p).__name__
        which = "" if readout == "window" else f" (readout={readout!r})"
        raise ValueError(f"params must be a dict with exactly the keys {sorted(names)}{which}, got {got}")
    f, w = check_Q_and_A(p["Q"], p["A"])
    r, n = ("q", "w") if readout == "window" else ("u", "f")
    check_array(r, p[r], ({"w": w, "f": f}[n],), names=(n,))
    beta = check_array("beta", p["beta"], ndim=1)
    if beta.shape not in ((1,), (f,)):
        raise ValueError(f"beta must have shape (1,) (scalar) or (f,) = ({f},), got shape {beta.shape}")
    common_dtype({k: p[k] for k in ("A", "Q", r, "beta")})
    return f, w


def check_step(p, Z_prev, C_t, do_t=None, dZ_t=None):
    """The arguments of ``gril.step_forward`` (and, given do_t and dZ_t, ``step_backward``): shapes, the params'
    dtype. Returns (f, w)."""
    f, w = check_params(p)
    dtype = p["A"].dtype
    B = check_dtype("C_t", check_array("C_t", C_t, (None, f, w), names=("B", "f", "w")), dtype).shape[0]
    check_dtype("Z_prev", check_array("Z_prev", Z_prev, (B, f, f), names=("B", "f", "f")), dtype)
    if do_t is not None or dZ_t is not None:
        check_dtype("do_t", check_array("do_t", do_t, (B, f), names=("B", "f")), dtype)
        check_dtype("dZ_t", check_array("dZ_t", dZ_t, (B, f, f), names=("B", "f", "f")), dtype)
    return f, w


def check_states(Q, A, C, **states_and_grads):
    """The arguments of ``gril.states`` / ``states_backward`` by name (for an overflow message), checked: shapes,
    and one dtype."""
    f, w = check_Q_and_A(Q, A)
    check_array("C", C, (None, None, f, w), names=("B", "T'", "f", "w"))
    for name, Z in states_and_grads.items():
        check_array(name, Z, C.shape[:2] + (f, f), names=("B", "T'", "f", "f"))
    inputs = {"A": A, "Q": Q, "C": C, **states_and_grads}
    common_dtype(inputs)
    return inputs
