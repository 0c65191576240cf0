"""AdamW (Loshchilov & Hutter 2019, Alg. 2), the warm-up + cosine schedule and global-norm clipping."""
import math

import numpy as np
import pytest

from minimal.optim import (NO_DECAY, AdamWState, adamw_init, adamw_step, clip_by_global_norm,
                           cosine_schedule, default_decay_mask, global_norm)


# --- AdamW: the update equations, written out by hand -------------------------------------------------

def test_two_adamw_steps_match_the_update_equations_by_hand():
    """θ = [1, -2], lr = 0.1, β1 = 0.9, β2 = 0.999, ε = 1e-8, wd = 0.01; gradients [0.5, -1] then [0.2, 0.4]."""
    eps = 1e-8
    params = {"W": np.array([1.0, -2.0])}
    state = adamw_init(params)

    # Step t = 1, g = [0.5, -1.0]
    #   m1 = 0.1 g = [0.05, -0.1]            v1 = 0.001 g² = [0.00025, 0.001]
    #   m̂1 = m1 / (1 - 0.9) = [0.5, -1.0]    v̂1 = v1 / (1 - 0.999) = [0.25, 1.0]
    #   θ1 = θ0 - 0.1 (m̂1 / (√v̂1 + ε) + 0.01 θ0)
    theta1 = [1.0 - 0.1 * (0.5 / (0.5 + eps) + 0.01 * 1.0),
              -2.0 - 0.1 * (-1.0 / (1.0 + eps) + 0.01 * -2.0)]
    params, state = adamw_step(params, {"W": np.array([0.5, -1.0])}, state, lr=0.1, eps=eps,
                               weight_decay=0.01, decay_mask={"W": True})
    assert state.step == 1
    np.testing.assert_allclose(state.m["W"], [0.05, -0.1], rtol=1e-15)
    np.testing.assert_allclose(state.v["W"], [0.00025, 0.001], rtol=1e-15)
    np.testing.assert_allclose(params["W"], theta1, rtol=1e-15)

    # Step t = 2, g = [0.2, 0.4]
    #   m2 = 0.9 m1 + 0.1 g = [0.045 + 0.02, -0.09 + 0.04] = [0.065, -0.05]
    #   v2 = 0.999 v1 + 0.001 g² = [0.00024975 + 0.00004, 0.000999 + 0.00016] = [0.00028975, 0.001159]
    #   m̂2 = m2 / (1 - 0.81) = m2 / 0.19        v̂2 = v2 / (1 - 0.998001) = v2 / 0.001999
    m2 = [0.065, -0.05]
    v2 = [0.00028975, 0.001159]
    m_hat = [m2[0] / 0.19, m2[1] / 0.19]
    v_hat = [v2[0] / 0.001999, v2[1] / 0.001999]
    theta2 = [theta1[i] - 0.1 * (m_hat[i] / (math.sqrt(v_hat[i]) + eps) + 0.01 * theta1[i]) for i in range(2)]
    params, state = adamw_step(params, {"W": np.array([0.2, 0.4])}, state, lr=0.1, eps=eps,
                               weight_decay=0.01, decay_mask={"W": True})
    assert state.step == 2
    np.testing.assert_allclose(state.m["W"], m2, rtol=1e-14)
    np.testing.assert_allclose(state.v["W"], v2, rtol=1e-14)
    np.testing.assert_allclose(params["W"], theta2, rtol=1e-14)


def test_first_step_moves_each_entry_by_about_lr_whatever_the_gradient_scale():
    # Bias correction makes m̂1/√v̂1 = sign(g): Adam's first step has size lr in every coordinate.
    params = {"W": np.zeros(3)}
    new, _ = adamw_step(params, {"W": np.array([1e-3, -7.0, 250.0])}, adamw_init(params), lr=0.01)
    np.testing.assert_allclose(new["W"], [-0.01, 0.01, -0.01], rtol=1e-4)


def test_step_returns_new_arrays_and_keeps_the_inputs_and_dtype():
    params = {"W": np.ones((2, 3), np.float32)}
    grads = {"W": np.full((2, 3), 0.5, np.float32)}
    state = adamw_init(params)
    new, new_state = adamw_step(params, grads, state, lr=0.1, weight_decay=0.1)
    np.testing.assert_array_equal(params["W"], 1.0)
    np.testing.assert_array_equal(state.m["W"], 0.0)
    assert state.step == 0
    assert new["W"].dtype == np.float32 and new_state.m["W"].dtype == np.float32
    assert new_state.v["W"].dtype == np.float32


# --- decoupled weight decay and its mask ---------------------------------------------------------------

def _zero_grad_run(params, steps, lr, wd, mask):
    state = adamw_init(params)
    for _ in range(steps):
        params, state = adamw_step(params, {k: np.zeros_like(p) for k, p in params.items()}, state, lr=lr,
                                   weight_decay=wd, decay_mask=mask)
    return params


def test_with_zero_gradients_decay_shrinks_by_exactly_one_minus_lr_wd_per_step():
    # Decoupled decay: θ_t = (1 - lr wd) θ_{t-1} when g = 0 (the adaptive step is 0 / (0 + ε) = 0).
    W0 = np.array([[1.5, -0.5]])
    out = _zero_grad_run({"W": W0}, 5, lr=0.1, wd=0.2, mask=None)
    np.testing.assert_allclose(out["W"], W0 * (1 - 0.1 * 0.2) ** 5, rtol=1e-14)


def test_default_mask_leaves_recurrent_lambda_params_untouched_by_decay():
    rng = np.random.default_rng(0)
    params = {name: rng.standard_normal(3) for name in ["W_V", "B", "nu_log", "theta_log", "gamma_log",
                                                        "layer0.nu_log", "A"]}
    out = _zero_grad_run(params, 4, lr=0.1, wd=0.5, mask=None)
    for name in ["nu_log", "theta_log", "gamma_log", "layer0.nu_log", "A"]:
        np.testing.assert_array_equal(out[name], params[name])
    for name in ["W_V", "B"]:
        np.testing.assert_allclose(out[name], params[name] * 0.95 ** 4, rtol=1e-14)


def test_default_mask_names():
    assert {"nu", "nu_log", "theta_log", "gamma_log", "A"} <= NO_DECAY
    assert not default_decay_mask("nu_log") and not default_decay_mask("cell/theta_log")
    assert default_decay_mask("W_Q") and default_decay_mask("Anu")


def test_explicit_dict_and_callable_masks():
    params = {"W": np.ones(2), "b": np.ones(2)}
    by_dict = _zero_grad_run(params, 3, lr=0.1, wd=1.0, mask={"W": True, "b": False})
    by_callable = _zero_grad_run(params, 3, lr=0.1, wd=1.0, mask=lambda name: name == "W")
    for out in (by_dict, by_callable):
        np.testing.assert_allclose(out["W"], 0.9 ** 3, rtol=1e-14)
        np.testing.assert_array_equal(out["b"], 1.0)


def test_adamw_minimises_a_convex_quadratic_to_high_accuracy():
    # f(θ) = ½ (θ - θ*)ᵀ H (θ - θ*), H symmetric positive definite with condition number 20.
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    H = Q @ np.diag(np.linspace(1.0, 20.0, 6)) @ Q.T
    theta_star = rng.standard_normal(6)
    params = {"theta": np.zeros(6)}
    state = adamw_init(params)
    steps = 1500
    for s in range(steps):
        grads = {"theta": H @ (params["theta"] - theta_star)}
        lr = cosine_schedule(s, steps, peak_lr=0.1, warmup_steps=50, final_lr=1e-6)
        params, state = adamw_step(params, grads, state, lr=lr, weight_decay=0.0)
    assert np.max(np.abs(params["theta"] - theta_star)) < 1e-10  # measured ~5e-16


# --- cosine schedule ----------------------------------------------------------------------------------

def test_schedule_warmup_start_end_midpoint_and_end():
    kw = dict(total_steps=110, peak_lr=1e-3, warmup_steps=10, final_lr=1e-6)  # Zucchet et al. App. B.1 range
    assert cosine_schedule(0, **kw) == pytest.approx(1e-4, rel=1e-15)      # t = 1: peak / W
    assert cosine_schedule(4, **kw) == pytest.approx(5e-4, rel=1e-15)      # linear in t
    assert cosine_schedule(9, **kw) == pytest.approx(1e-3, rel=1e-15)      # warm-up ends at the peak
    assert cosine_schedule(59, **kw) == pytest.approx((1e-3 + 1e-6) / 2, rel=1e-15)  # t - W = 50 of 100
    assert cosine_schedule(109, **kw) == pytest.approx(1e-6, rel=1e-12)    # last step: the floor
    assert cosine_schedule(500, **kw) == pytest.approx(1e-6, rel=1e-12)    # stays at the floor
    decay = [cosine_schedule(s, **kw) for s in range(9, 110)]
    assert all(a > b for a, b in zip(decay, decay[1:]))


def test_schedule_without_warmup_starts_just_below_peak():
    lr0 = cosine_schedule(0, 4, peak_lr=1.0, warmup_steps=0, final_lr=0.0)
    assert lr0 == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)), rel=1e-15)
    assert cosine_schedule(3, 4, peak_lr=1.0, warmup_steps=0, final_lr=0.0) == 0.0


def test_schedule_that_is_all_warmup_ends_at_peak_then_stays_at_the_floor():
    kw = dict(total_steps=10, peak_lr=1e-3, warmup_steps=10, final_lr=1e-6)
    assert cosine_schedule(0, **kw) == pytest.approx(1e-4, rel=1e-15)
    assert cosine_schedule(9, **kw) == pytest.approx(1e-3, rel=1e-15)   # the last step: the end of warm-up
    assert cosine_schedule(10, **kw) == 1e-6                            # past N: the floor, no 0/0
    assert cosine_schedule(50, **kw) == 1e-6


# --- clipping -----------------------------------------------------------------------------------------

def test_clipping_scales_to_exactly_max_norm_and_keeps_direction():
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([[0.0], [4.0]])}  # global norm 5
    clipped, norm = clip_by_global_norm(grads, 2.0)
    assert norm == 5.0
    assert global_norm(clipped) == pytest.approx(2.0, rel=1e-15)
    np.testing.assert_allclose(clipped["a"], [1.2, 0.0], rtol=1e-15)
    np.testing.assert_allclose(clipped["b"], [[0.0], [1.6]], rtol=1e-15)


def test_the_global_norm_sums_every_layout_and_dtype_in_float64():
    """Contiguous float32 and float64 arrays (a 0-d one too) take the compiled pass, a transposed one, a strided
    float32 one, an integer one and a masked one NumPy's float64 squares: each within float64 rounding of the exact
    sum (float32 squares are exact in float64, and 1e20² would overflow float32 but not float64); a masked array's
    masked entries count for nothing, as in NumPy's sum."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    grads = {"f32": rng.standard_normal((7, 33)).astype(np.float32), "f64": rng.standard_normal(1000),
             "t": rng.standard_normal((5, 4)).T, "0d": np.array(2.5), "i": np.arange(4),
             "big": np.array([1e20, -1e20], np.float32), "empty": np.zeros((0, 3), np.float32),
             "strided": rng.standard_normal(20).astype(np.float32)[::3]}
    exact = sum(Fraction(float(x)) ** 2 for g in grads.values() for x in np.asarray(g, np.float64).ravel())
    assert global_norm(grads) == pytest.approx(float(exact) ** 0.5, rel=1e-14)
    masked = np.ma.masked_array(np.float32([3.0, 4.0, 100.0]), mask=[False, False, True])
    assert global_norm({"m": masked}) == 5.0
    assert global_norm({"a": np.float32([3.0, 4.0])}) == 5.0


def test_clipping_leaves_smaller_gradients_alone():
    grads = {"a": np.array([0.3, -0.4])}
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(0.5, rel=1e-15)
    assert clipped["a"] is grads["a"]


# --- bad input ----------------------------------------------------------------------------------------

@pytest.fixture
def p():
    return {"W": np.ones((2, 2)), "nu_log": np.zeros(2)}


def test_grads_must_have_params_keys(p):
    with pytest.raises(ValueError, match="grads must have exactly the keys of params: missing \\['nu_log'\\]"):
        adamw_step(p, {"W": np.ones((2, 2))}, adamw_init(p), lr=0.1)


def test_grads_shape_and_dtype_must_match(p):
    with pytest.raises(ValueError, match="grads\\['W'\\] must have shape"):
        adamw_step(p, {"W": np.ones(4), "nu_log": np.zeros(2)}, adamw_init(p), lr=0.1)
    with pytest.raises(ValueError, match="grads\\['W'\\] must have params\\['W'\\]'s dtype"):
        adamw_step(p, {"W": np.ones((2, 2), np.float32), "nu_log": np.zeros(2)}, adamw_init(p), lr=0.1)
    with pytest.raises(ValueError, match="grads\\['nu_log'\\] contains NaN"):
        adamw_step(p, {"W": np.ones((2, 2)), "nu_log": np.array([0.0, np.nan])}, adamw_init(p), lr=0.1)


@pytest.mark.parametrize("kw, arg", [({"lr": -1e-3}, "lr"), ({"lr": float("nan")}, "lr"),
                                     ({"beta1": 1.0}, "beta1"), ({"beta2": -0.1}, "beta2"),
                                     ({"eps": 0.0}, "eps"), ({"weight_decay": -0.1}, "weight_decay"),
                                     ({"decay_mask": {"W": True}}, "decay_mask"),
                                     ({"decay_mask": "W"}, "decay_mask")])
def test_bad_hyperparameters(p, kw, arg):
    kw = {"lr": 0.1, **kw}
    with pytest.raises(ValueError, match=arg):
        adamw_step(p, {k: np.zeros_like(v) for k, v in p.items()}, adamw_init(p), **kw)


def test_bad_state_and_params(p):
    g = {k: np.zeros_like(v) for k, v in p.items()}
    with pytest.raises(ValueError, match="state must be an AdamWState"):
        adamw_step(p, g, {"m": {}, "v": {}}, lr=0.1)
    with pytest.raises(ValueError, match="state.m must have exactly the keys"):
        adamw_step(p, g, AdamWState(0, {}, adamw_init(p).v), lr=0.1)
    with pytest.raises(ValueError, match="params\\['W'\\] must have a floating dtype"):
        adamw_init({"W": np.ones(2, dtype=np.int64)})
    with pytest.raises(ValueError, match="params must be a non-empty dict"):
        adamw_init({})


@pytest.mark.parametrize("args, arg", [((-1, 10, 1e-3, 0, 0.0), "step"), ((0, 0, 1e-3, 0, 0.0), "total_steps"),
                                       ((0, 10, 1e-3, 11, 0.0), "warmup_steps"),
                                       ((0, 10, -1e-3, 0, 0.0), "peak_lr"),
                                       ((0, 10, 1e-3, 0, 2e-3), "final_lr")])
def test_bad_schedule_arguments(args, arg):
    with pytest.raises(ValueError, match=arg):
        cosine_schedule(*args)


def test_bad_clipping_arguments():
    with pytest.raises(ValueError, match="max_norm"):
        clip_by_global_norm({"a": np.ones(2)}, 0.0)
    with pytest.raises(ValueError, match="grads\\['a'\\] contains NaN"):
        clip_by_global_norm({"a": np.array([np.inf])}, 1.0)


def test_moments_that_overflow_are_an_error_not_an_inf_state():
    """float32 gradients of 1e20 are finite, but g² is not: adamw_step must not hand back v = inf."""
    params = {"W": np.ones((2, 2), np.float32), "b": np.zeros(2, np.float32)}
    grads = {"W": np.full((2, 2), 1e20, np.float32), "b": np.ones(2, np.float32)}
    with pytest.raises(FloatingPointError, match=r"second moment v\['W'\] overflowed in float32 .*grads\['W'\] "
                                                 r"has values up to 1e\+20.*Clip the gradients"):
        adamw_step(params, grads, adamw_init(params), 1e-3)
    big = {k: g.astype(np.float64) for k, g in grads.items()}  # the same gradients fit in float64
    new, state = adamw_step({k: p.astype(np.float64) for k, p in params.items()}, big,
                            adamw_init(big), 1e-3)
    assert all(np.all(np.isfinite(a)) for a in (*new.values(), *state.v.values()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_compiled_adamw_pass_is_bit_identical_to_the_numpy_lines(monkeypatch, dtype):
    from minimal import optim

    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((5, 3)).astype(dtype), "b": rng.standard_normal(3).astype(dtype),
              "nu_log": rng.standard_normal(4).astype(dtype)}          # nu_log: not decayed
    zero = {k: np.zeros_like(v) for k, v in params.items()}
    assert optim._adamw_step_fused(params, zero, optim.adamw_init(params), 0.01, 0.9, 0.999, 1e-8, 0.1,
                                   None) is not None                  # the compiled pass does run here
    runs = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(optim, "_adamw_step_fused", lambda *a: None)
        p, state = dict(params), optim.adamw_init(params)
        for t in range(4):
            grads = {k: (np.random.default_rng(t).standard_normal(v.shape) * 10.0 ** (t - 2)).astype(dtype)
                     for k, v in p.items()}
            p, state = optim.adamw_step(p, grads, state, lr=0.01 * (t + 1), weight_decay=0.1)
        runs.append((p, state))
    (p1, s1), (p2, s2) = runs
    for k in params:
        for a, b in ((p1[k], p2[k]), (s1.m[k], s2.m[k]), (s1.v[k], s2.v[k])):
            assert a.dtype == dtype
            np.testing.assert_array_equal(a, b)


def test_the_compiled_adamw_pass_leaves_bad_inputs_to_the_named_errors():
    from minimal import optim

    params = {"W": np.ones(3, np.float32)}
    state = optim.adamw_init(params)
    with pytest.raises(ValueError, match="grads"):
        optim.adamw_step(params, {"W": np.array([1.0, np.nan, 0.0], np.float32)}, state, lr=0.1)
    with pytest.raises(FloatingPointError, match="second moment"):
        optim.adamw_step(params, {"W": np.full(3, 1e30, np.float32)}, state, lr=0.1)
