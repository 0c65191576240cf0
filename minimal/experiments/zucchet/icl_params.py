"""The in-context regression network's trainable parameters (``icl``, Zucchet et al., Sec. 4.2, App. C.1):
their initialisation, and λ as the optimiser's own coordinate.

``init_params`` draws the gated RNN's params (``minimal.cells.gated_rnn``) and, for ``icl.Config()``'s
``lam_param="lam"``, stores the recurrence as λ itself instead of ν; ``cell_params`` maps them back to the cell's
params (ν = log(-log λ)); ``loss_and_grads`` is the query loss and its gradients with dL/dλ projected onto [0, 1].
``icl`` trains with them and reads the network through ``cell_params``.

Glossary: H recurrent neurons, B tasks, d_y target size.
"""
from __future__ import annotations

import numpy as np

from ...cells import gated_rnn
from ...tasks import icl_regression

__all__ = ["LAM_PARAMS", "LAM_EPS", "init_params", "cell_params", "loss_and_grads"]

LAM_PARAMS = ("lam", "nu")
LAM_EPS = 1e-6   # λ is used inside [LAM_EPS, 1 - LAM_EPS] so that the cell's ν = log(-log λ) stays finite


def init_params(rng, config):
    """Trainable params for tokens of size d_x + d_y + 1, H = ``config.hidden``, readout to d_y, in config.dtype.

    The gated RNN's (``minimal.cells.gated_rnn.init``) with the readout D scaled by ``readout_scale`` and, for
    ``lam_param="lam"``, the recurrence stored as λ itself ("lam", (H,)) instead of ν (see ``cell_params``);
    ``config``: an ``icl.Config``.
    """
    if config.lam_param not in LAM_PARAMS:
        raise ValueError(f"lam_param must be one of {LAM_PARAMS}, got {config.lam_param!r}")
    d_in = icl_regression.token_dim(config.d_x, config.d_y)
    params = gated_rnn.init(rng, d_in=d_in, d_hidden=config.hidden, d_out=config.d_y, lam_max=config.lam_max)
    params["D"] = params["D"] * config.readout_scale
    if config.lam_param == "lam":
        params = {("lam" if k == "nu" else k): (gated_rnn.lam_from_nu(v) if k == "nu" else v)
                  for k, v in params.items()}
    return {k: v.astype(config.dtype) for k, v in params.items()}


def cell_params(params):
    """The cell's params (with ν) from ours: ν = log(-log λ) for λ clipped to [LAM_EPS, 1 - LAM_EPS].

    Why λ itself. dλ/dν = λ log λ vanishes at both ends, so AdamW on ν moves λ towards 1 (key-value neurons)
    or 0 (query neurons) ever more slowly: the previous runs stalled at λ ≈ 0.988, which costs ~1e-4 of loss
    (a context pair k steps back is weighted λ^k). On λ itself the gradient does not vanish; AdamW then
    works as a projected method on [0, 1] (``loss_and_grads``). Params that already hold "nu" pass through.
    """
    if "lam" not in params:
        return params
    lam = np.clip(np.asarray(params["lam"], np.float64), LAM_EPS, 1.0 - LAM_EPS)
    out = {k: v for k, v in params.items() if k != "lam"}
    out["nu"] = gated_rnn.nu_from_lam(lam).astype(params["lam"].dtype)
    return out


def loss_and_grads(params, tasks):
    """Query loss (1/2 mean squared error) and its gradients, through the cell's own backward.

    With "lam" params, dL/dλ = (dL/dν) / (dλ/dν), dλ/dν from the cell's own ``gated_rnn.dlam_dnu`` (same ν, same
    dtype), so the division undoes the cell's multiplication. Where λ sits on a bound of
    [0, 1] and the gradient points outwards, it is set to 0 (projected gradient): λ stays at 0 or 1 instead
    of drifting past it.
    """
    cp = cell_params(params)
    y, cache = gated_rnn.forward(cp, tasks.tokens, readout="last")   # the loss sees only the query's output
    loss, dy_hat = icl_regression.query_loss(y[:, 0], tasks.y_q)
    _, grads = gated_rnn.backward(cp, cache, dy_hat[:, None])
    if "lam" in params:
        nu = cp["nu"]
        dlam = grads.pop("nu") / gated_rnn.dlam_dnu(nu)
        lam = params["lam"]
        outward = ((lam >= 1.0 - LAM_EPS) & (dlam < 0)) | ((lam <= LAM_EPS) & (dlam > 0))
        grads["lam"] = np.where(outward, 0, dlam).astype(lam.dtype)
        grads = {k: grads[k] for k in params}
    return loss, grads
