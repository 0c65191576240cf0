"""The LRU block (Orvieto et al. 2023; variants of Zucchet et al. App. A.1): gradients w.r.t. the real
parametrisation of the complex layer, the parallel / sequential / step modes, |λ| < 1, the γ normalisation,
the LRU as a linear time-invariant convolution, and the in_skip gate reading the current input."""
import numpy as np
import pytest

from minimal import scan
from minimal.cells import lru
from minimal.gradcheck import TOLERANCE, check_cell

EXAMPLES = lru.examples(np.random.default_rng(0))
CONFIGS = {"out": {"d_in": 3}, "in_out": {"d_in": 3, "d_model": 4}, "in_skip": {"d_in": 3, "d_model": 4}}


@pytest.mark.parametrize("ex", EXAMPLES, ids=[ex.name for ex in EXAMPLES])
def test_every_example_passes_gradcheck(ex):
    errors = check_cell(lru, ex)
    assert set(errors) == set(ex.params) | {"x"}
    assert max(errors.values()) <= TOLERANCE, errors


def test_examples_cover_every_variant_T1_and_odd_T():
    assert {ex.kwargs["variant"] for ex in EXAMPLES} == set(lru.VARIANTS)
    assert {ex.x.shape[1] for ex in EXAMPLES} >= {1, 3, 5}


def _close(a, b, tol=1e-12):
    return np.max(np.abs(a - b)) <= tol * max(np.max(np.abs(b)), 1e-300)


@pytest.mark.parametrize("variant", lru.VARIANTS)
def test_parallel_and_sequential_scans_agree_forward_and_backward(rng, variant):
    params = lru.init(rng, d_state=5, d_out=2, variant=variant, **CONFIGS[variant])
    x, dy = rng.standard_normal((2, 13, 3)), rng.standard_normal((2, 13, 2))
    out = {}
    for mode in lru.MODES:
        y, cache = lru.forward(params, x, variant=variant, mode=mode)
        out[mode] = (y, *lru.backward(params, cache, dy))
    (y0, dx0, g0), (y1, dx1, g1) = out["sequential"], out["parallel"]
    assert _close(y1, y0) and _close(dx1, dx0)
    for k in params:
        assert _close(g1[k], g0[k]), k


@pytest.mark.parametrize("variant", lru.VARIANTS)
def test_step_mode_equals_parallel_mode(rng, variant):
    params = lru.init(rng, d_state=5, d_out=2, variant=variant, **CONFIGS[variant])
    x = rng.standard_normal((3, 11, 3))
    y, _ = lru.forward(params, x, variant=variant)
    h = np.zeros((3, 5), dtype=complex)
    ys = []
    for t in range(x.shape[1]):
        y_t, h = lru.step_forward(params, x[:, t], h, variant=variant)
        ys.append(y_t)
    assert _close(np.stack(ys, axis=1), y)


def test_complex_scan_matches_the_closed_form_sum_at_non_power_of_two_lengths(rng):
    lam = 0.9 * np.exp(1j * rng.uniform(0, 2 * np.pi, 4))
    for T in (1, 2, 3, 7, 33):
        b = rng.standard_normal((2, T, 4)) + 1j * rng.standard_normal((2, T, 4))
        powers = lam[None, :] ** np.arange(T)[:, None]                        # (T, N)
        ref = np.stack([np.sum(powers[t::-1] * b[:, :t + 1], axis=1) for t in range(T)], axis=1)
        for mode in lru.MODES:
            assert _close(lru.complex_scan(lam, b, mode), ref), (T, mode)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_sequential_mode_is_the_scans_reference_loop_and_the_adjoint_its_backward(rng, dtype):
    """complex_scan(mode="sequential") is ``minimal.scan.linear_scan``'s NumPy loop with a_t = λ, bit for bit the
    loop over t this module carried before; the reverse scan of ``backward`` is the scan's complex VJP dL/db
    (g_t = ḡ_{h_t} + conj(λ) g_{t+1}); Hillis-Steele (mode "parallel") agrees to rounding."""
    lam = (0.95 * np.exp(1j * rng.uniform(0, 2 * np.pi, 4))).astype(dtype)
    b, gh = ((rng.standard_normal((2, 37, 4)) + 1j * rng.standard_normal((2, 37, 4))).astype(dtype) for _ in "12")
    loop, prev = np.empty_like(b), np.zeros_like(b[:, 0])
    for t in range(b.shape[1]):
        prev = lam * prev + b[:, t]
        loop[:, t] = prev
    h = lru.complex_scan(lam, b, "sequential")
    a = np.broadcast_to(lam, b.shape)
    assert h.dtype == dtype and np.array_equal(h, loop)
    assert np.array_equal(h, scan.linear_scan(a, b, method="sequential", backend="numpy"))
    _, db, _ = scan.linear_scan_backward(a, h, gh, method="sequential", backend="numpy")
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    for mode in lru.MODES:
        assert _close(lru.complex_scan(lam, b, mode), loop, tol)
        assert _close(lru.complex_scan(lam.conj(), gh[:, ::-1], mode)[:, ::-1], db, tol), mode


def test_lambda_is_strictly_inside_the_unit_disc_on_the_initial_ring(rng):
    params = lru.init(rng, d_in=2, d_state=2000, d_out=1, r_min=0.5, r_max=0.99, max_phase=np.pi)
    lam = lru.lambda_of(params)
    assert np.all(np.abs(lam) < 1)
    assert np.all((np.abs(lam) >= 0.5 - 1e-12) & (np.abs(lam) <= 0.99 + 1e-12))
    assert np.all((np.angle(lam) >= 0) & (np.angle(lam) <= np.pi))
    # |λ| = exp(-exp(ν_log)) < 1 for any finite ν_log, whatever θ_log.
    lam = lru.lambda_of({"nu_log": np.linspace(-30, 5, 50), "theta_log": np.linspace(-5, 5, 50)})
    assert np.all(np.abs(lam) < 1)


def test_gamma_normalisation_gives_the_impulse_response_unit_energy(rng):
    # Orvieto et al. Sec. 3.4: with γ = sqrt(1 - |λ|^2) a unit impulse leaves Σ_t |h_t|^2 = 1 - |λ|^{2T},
    # so white-noise inputs keep their variance in the state.
    params = lru.init(rng, d_in=1, d_state=4, d_out=1, r_min=0.5, r_max=0.9)
    params["B_re"], params["B_im"] = np.ones((4, 1)), np.zeros((4, 1))
    T = 40
    x = np.zeros((1, T, 1))
    x[0, 0, 0] = 1.0
    _, cache = lru.forward(params, x)
    energy = np.sum(np.abs(cache.h[0]) ** 2, axis=0)
    lam_abs = np.abs(lru.lambda_of(params))
    assert np.allclose(energy, 1 - lam_abs ** (2 * T), rtol=1e-12, atol=0)


def test_the_lru_is_a_linear_time_invariant_convolution(rng):
    # z_t = Σ_k K_k u_{t-k} with K_k = Re(C diag(λ^k γ) B) + D δ_k: the convolution view of the recurrence.
    params = lru.init(rng, d_in=3, d_state=4, d_out=2)
    x = rng.standard_normal((2, 9, 3))
    _, cache = lru.forward(params, x)
    lam, gamma = lru.lambda_of(params), np.exp(params["gamma_log"])
    B = params["B_re"] + 1j * params["B_im"]
    C = params["C_re"] + 1j * params["C_im"]
    K = np.stack([((C * (lam ** k * gamma)) @ B).real for k in range(9)])   # (T, H, H)
    K[0] += np.diag(params["D"])
    z = np.stack([sum(x[:, t - k] @ K[k].T for k in range(t + 1)) for t in range(9)], axis=1)
    assert _close(cache.z, z)


def test_in_skip_sigmoid_branch_reads_the_current_input_as_in_app_a1(rng):
    # App. A.1: in LRU In-Skip the m branch of Eq. 8's GLU σ(W_m ·) ⊙ (W_x ·), the sigmoid one, reads x_t.
    # Ours: y_t = (W_out_m z_t) ⊙ σ(W_out_x x_t). With W_out_m = 0 except through z, the gate is a function
    # of the current token only: changing an earlier token leaves σ(W_out_x x_t) unchanged, so y_t / (W_out_m z_t)
    # is the same; and with W_out_x = 0 the gate is the constant 1/2, leaving y = W_out_m z / 2.
    params = lru.init(rng, d_state=3, d_out=2, variant="in_skip", **CONFIGS["in_skip"])
    assert params["W_out_x"].shape == (2, 3) and params["W_out_m"].shape == (2, 4)
    x = rng.standard_normal((2, 6, 3))
    y, cache = lru.forward(params, x, variant="in_skip")
    sig = 1.0 / (1.0 + np.exp(-(x @ params["W_out_x"].T)))
    assert _close(y, (cache.z @ params["W_out_m"].T) * sig)
    x2 = x.copy()
    x2[:, 0] += 1.0                                  # an earlier token changes the memory z_t, not the gate
    y2, cache2 = lru.forward(params, x2, variant="in_skip")
    assert _close(y2[:, -1] / (cache2.z[:, -1] @ params["W_out_m"].T), sig[:, -1])
    assert not np.allclose(cache2.z[:, -1], cache.z[:, -1])
    y0, c0 = lru.forward({**params, "W_out_x": np.zeros_like(params["W_out_x"])}, x, variant="in_skip")
    assert _close(y0, 0.5 * c0.z @ params["W_out_m"].T)


def test_nu_log_past_709_gives_a_zero_gradient_not_nan(rng):
    # |λ| = exp(-exp(ν_log)) underflows to 0; d|λ|/dν_log = -exp(ν_log - exp(ν_log)) must then be 0, not -inf · 0
    params = lru.init(rng, d_state=3, d_out=2, variant="in_out", **CONFIGS["in_out"])
    params["nu_log"] = np.array([800.0, 0.5, -1.0])
    x = rng.standard_normal((2, 5, 3))
    with np.errstate(all="raise"):
        y, cache = lru.forward(params, x, variant="in_out")
        dx, grads = lru.backward(params, cache, np.ones_like(y))
    assert all(np.all(np.isfinite(g)) for g in grads.values()) and np.all(np.isfinite(dx))
    assert grads["nu_log"][0] == 0.0


# --- bad input -------------------------------------------------------------------------------------------

@pytest.fixture
def small(rng):
    return lru.init(rng, d_in=3, d_state=4, d_out=2, variant="in_skip", d_model=5), rng.standard_normal((2, 5, 3))


def test_x_with_wrong_shape_is_rejected(small):
    params, x = small
    with pytest.raises(ValueError, match="x must have shape"):
        lru.forward(params, x[..., :2], variant="in_skip")
    with pytest.raises(ValueError, match="x must have at least one time step"):
        lru.forward(params, x[:, :0], variant="in_skip")


def test_variant_mode_and_params_are_checked(small):
    params, x = small
    with pytest.raises(ValueError, match="variant must be one of"):
        lru.forward(params, x, variant="in")
    with pytest.raises(ValueError, match="mode must be one of"):
        lru.forward(params, x, variant="in_skip", mode="blelloch")
    # the parallel/sequential choice is `mode`; `method` names minimal.scan's algorithms, which the LRU has none of
    for call in (lambda: lru.forward(params, x, variant="in_skip", method="sequential"),
                 lambda: lru.complex_scan(np.ones(2), np.ones((1, 3, 2), complex), method="parallel")):
        with pytest.raises(ValueError, match=r"`method` now names the scan algorithm .* is `mode`"):
            call()
    with pytest.raises(ValueError, match="params must have exactly the keys"):
        lru.forward(params, x, variant="out")
    # in_out's sigmoid branch reads the LRU output (width H = 5), not x (width 3) as in_skip's does
    with pytest.raises(ValueError, match="W_out_x must have shape"):
        lru.forward(params, x, variant="in_out")
    with pytest.raises(ValueError, match="C_im must have shape"):
        lru.forward({**params, "C_im": params["C_im"].T}, x, variant="in_skip")
    with pytest.raises(ValueError, match="nu_log contains NaN or inf"):
        lru.forward({**params, "nu_log": np.full(4, np.nan)}, x, variant="in_skip")


def test_dy_and_step_inputs_are_checked(small):
    params, x = small
    y, cache = lru.forward(params, x, variant="in_skip")
    with pytest.raises(ValueError, match="dy must have shape"):
        lru.backward(params, cache, y[..., :1])
    with pytest.raises(ValueError, match="h_prev must have a complex dtype"):
        lru.step_forward(params, x[:, 0], np.zeros((2, 4)), variant="in_skip")
    with pytest.raises(ValueError, match="h_prev must have shape"):
        lru.step_forward(params, x[:, 0], np.zeros((2, 3), dtype=complex), variant="in_skip")


def test_one_dtype_throughout_nothing_is_promoted(small):
    # like the gate-based cells: a float32 input to float64 params is refused, not silently run in float64
    params, x = small
    with pytest.raises(ValueError, match=r"^x must have the params' dtype float64, got float32"):
        lru.forward(params, x.astype(np.float32), variant="in_skip")
    with pytest.raises(ValueError, match=r"^D must have the dtype of nu_log \(float64\), got float32"):
        lru.forward({**params, "D": params["D"].astype(np.float32)}, x, variant="in_skip")
    h = np.zeros((2, 4), dtype=np.complex128)
    with pytest.raises(ValueError, match=r"^x_t must have the params' dtype float64, got float32"):
        lru.step_forward(params, x[:, 0].astype(np.float32), h, variant="in_skip")
    with pytest.raises(ValueError, match=r"^h_prev must have the params' complex dtype complex128, got complex64"):
        lru.step_forward(params, x[:, 0], h.astype(np.complex64), variant="in_skip")
    p32 = {k: p.astype(np.float32) for k, p in params.items()}
    y, h1 = lru.step_forward(p32, x[:, 0].astype(np.float32), h.astype(np.complex64), variant="in_skip")
    assert y.dtype == np.float32 and h1.dtype == np.complex64


def test_init_arguments_are_checked(rng):
    with pytest.raises(ValueError, match="d_model must equal d_in"):
        lru.init(rng, d_in=3, d_state=4, d_out=2, d_model=5)
    with pytest.raises(ValueError, match="r_min, r_max"):
        lru.init(rng, d_in=3, d_state=4, d_out=2, r_max=1.0)
    with pytest.raises(ValueError, match="max_phase"):
        lru.init(rng, d_in=3, d_state=4, d_out=2, max_phase=0.0)
    with pytest.raises(ValueError, match="variant must be one of"):
        lru.init(rng, d_in=3, d_state=4, d_out=2, variant="gated")
