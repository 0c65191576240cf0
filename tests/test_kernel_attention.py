"""Attention is an RNN (Katharopoulos et al. 2020) and the random-feature view of softmax attention."""
import numpy as np
import pytest

from minimal import kernel_attention

B, DK, DV = 2, 3, 2


def _qkv(rng, T, scale=0.5, dtype=np.float64):
    return tuple((scale * rng.standard_normal((B, T, d))).astype(dtype) for d in (DK, DK, DV))


def _omega():
    return kernel_attention.sample_omega(np.random.default_rng(7), 8, DK)


FEATURE_MAPS = {
    "random": lambda x: kernel_attention.random_features(x, _omega()),
    "elu": kernel_attention.elu_features,
    "poly2": kernel_attention.poly2_features,
}


# ---------------------------------------------------------------------------------------------- feature maps

def test_random_features_are_positive_with_2D_entries(rng):
    x = rng.standard_normal((4, 5, DK))
    f = kernel_attention.random_features(x, _omega())
    assert f.shape == (4, 5, 16)
    assert np.all(f > 0)


def test_one_antithetic_pair_gives_the_cosh_formula(rng):
    # with D = 1: <φ_F(x), φ_F(x')> = exp(-(|x|^2 + |x'|^2)/2) cosh(<ω, x + x'>), written out independently
    x, y, omega = rng.standard_normal(DK), rng.standard_normal(DK), rng.standard_normal((1, DK))
    got = kernel_attention.random_features(x, omega) @ kernel_attention.random_features(y, omega)
    want = np.exp(-(x @ x + y @ y) / 2) * np.cosh(omega[0] @ (x + y))
    assert abs(got - want) <= 1e-14 * want


def test_random_features_are_unbiased_for_exp_of_the_dot_product(rng):
    x, y = 0.5 * rng.standard_normal(DK), 0.5 * rng.standard_normal(DK)
    # the mean over 2000 independent draws of D = 10 features; its standard error is estimated from the draws
    est = np.array([kernel_attention.random_features(x, om) @ kernel_attention.random_features(y, om)
                    for om in rng.standard_normal((2000, 10, DK))])
    stderr = est.std() / np.sqrt(est.size)
    assert abs(est.mean() - np.exp(x @ y)) <= 4 * stderr
    assert stderr < 0.01 * np.exp(x @ y)


def test_random_feature_error_shrinks_like_one_over_sqrt_D(rng):
    x, y = 0.5 * rng.standard_normal(DK), 0.5 * rng.standard_normal(DK)
    Ds = np.array([10, 100, 1000])
    rmse = [np.sqrt(np.mean([(kernel_attention.random_features(x, om) @ kernel_attention.random_features(y, om)
                              - np.exp(x @ y)) ** 2 for om in rng.standard_normal((300, D, DK))]))
            for D in Ds]
    slope = np.polyfit(np.log(Ds), np.log(rmse), 1)[0]
    assert -0.6 <= slope <= -0.4, slope


def test_elu_features_are_elu_plus_one():
    x = np.array([[-3.0, -0.5, 0.0, 0.5, 3.0]])
    elu = np.where(x > 0, x, np.exp(x) - 1)
    np.testing.assert_allclose(kernel_attention.elu_features(x), elu + 1, rtol=0, atol=1e-15)
    assert np.all(kernel_attention.elu_features(np.array([-700.0, 1e300])) > 0)


@pytest.mark.parametrize("c", [0.0, 1.0, 2.5])
def test_poly2_map_is_exact_for_the_degree_2_kernel(rng, c):
    x, y = rng.standard_normal((5, DK)), rng.standard_normal((5, DK))
    f = kernel_attention.poly2_features(x, c)
    assert f.shape == (5, 1 + DK + DK ** 2)
    np.testing.assert_allclose(np.sum(f * kernel_attention.poly2_features(y, c), axis=1),
                               (c + np.sum(x * y, axis=1)) ** 2, rtol=1e-13)


# ----------------------------------------------------------------------------- transformer mode == RNN mode

@pytest.mark.parametrize("T", [1, 7])
@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_transformer_mode_equals_rnn_mode(rng, name, T):
    Q, K, V = _qkv(rng, T)
    phi = FEATURE_MAPS[name]
    Y_par = kernel_attention.kernel_attention_parallel(Q, K, V, phi)
    Y_rnn, _ = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    assert Y_par.shape == (B, T, DV)
    assert np.max(np.abs(Y_par - Y_rnn)) <= 1e-12 * np.max(np.abs(Y_par))


@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_the_state_is_the_sum_of_value_feature_outer_products(rng, name):
    Q, K, V = _qkv(rng, 5)
    phi = FEATURE_MAPS[name]
    _, state = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    np.testing.assert_allclose(state.S, np.einsum("btv,btf->bvf", V, phi(K)), rtol=1e-13)
    np.testing.assert_allclose(state.u, phi(K).sum(axis=1), rtol=1e-13)


def test_rnn_mode_resumes_from_a_state(rng):
    Q, K, V = _qkv(rng, 7)
    phi = kernel_attention.elu_features
    Y, state = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    Y1, mid = kernel_attention.kernel_attention_rnn(Q[:, :3], K[:, :3], V[:, :3], phi)
    Y2, end = kernel_attention.kernel_attention_rnn(Q[:, 3:], K[:, 3:], V[:, 3:], phi, state=mid)
    np.testing.assert_allclose(np.concatenate([Y1, Y2], axis=1), Y, rtol=1e-13)
    np.testing.assert_allclose(end.S, state.S, rtol=1e-13)
    # resuming again from mid gives the same end: the first resume did not modify mid in place
    _, again = kernel_attention.kernel_attention_rnn(Q[:, 3:], K[:, 3:], V[:, 3:], phi, state=mid)
    np.testing.assert_array_equal(again.S, end.S)


def test_one_step_equals_the_rnn_loop(rng):
    Q, K, V = _qkv(rng, 4)
    phi = kernel_attention.poly2_features
    Y, _ = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    state = kernel_attention.initial_state(B, DV, 1 + DK + DK ** 2)
    for t in range(4):
        state, y = kernel_attention.kernel_attention_step(state, Q[:, t], K[:, t], V[:, t], phi)
        np.testing.assert_allclose(y, Y[:, t], rtol=1e-13)


def test_non_causal_attention_reads_the_final_state(rng):
    Q, K, V = _qkv(rng, 6)
    phi = kernel_attention.elu_features
    _, state = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    phi_Q = phi(Q)
    want = np.einsum("bvf,btf->btv", state.S, phi_Q) / np.einsum("bf,btf->bt", state.u, phi_Q)[..., None]
    np.testing.assert_allclose(kernel_attention.kernel_attention_parallel(Q, K, V, phi, causal=False), want,
                               rtol=1e-12)


@pytest.mark.parametrize("T", [1, 7])
def test_without_the_denominator_both_modes_are_linear_self_attention(rng, T):
    # φ(x) = x and no normalisation is Zucchet et al.'s Eq. 1; compare with the LSA cell, written independently
    from minimal.cells import lsa
    params = lsa.init(np.random.default_rng(1), D=4, D_k=DK, D_v=DV)
    x = rng.standard_normal((B, T, 4))
    Q, K, V = (x @ params[w].T for w in ("W_Q", "W_K", "W_V"))
    want, _ = lsa.forward(params, x)
    identity = lambda z: z  # noqa: E731
    Y_rnn, state = kernel_attention.kernel_attention_rnn(Q, K, V, identity, normalise=False)
    np.testing.assert_allclose(kernel_attention.kernel_attention_parallel(Q, K, V, identity, normalise=False), want,
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(Y_rnn, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_feature_maps_keep_float32(rng, name):
    x = rng.standard_normal((2, DK)).astype(np.float32)
    phi = (lambda z: kernel_attention.random_features(z, _omega().astype(np.float32))) if name == "random" \
        else FEATURE_MAPS[name]
    assert phi(x).dtype == np.float32


def test_modes_agree_in_float32_to_float32_precision(rng):
    Q, K, V = _qkv(rng, 9, dtype=np.float32)
    Y_par = kernel_attention.kernel_attention_parallel(Q, K, V, kernel_attention.elu_features)
    Y_rnn, _ = kernel_attention.kernel_attention_rnn(Q, K, V, kernel_attention.elu_features)
    assert Y_par.dtype == Y_rnn.dtype == np.float32
    assert np.max(np.abs(Y_par - Y_rnn)) <= 1e-5


def test_rnn_mode_has_the_dtype_of_transformer_mode_when_phi_promotes(rng):
    # a φ returning float64 for float32 Q, K: both modes compute in float64, neither casts back to float32
    Q, K, V = _qkv(rng, 5, dtype=np.float32)
    phi = lambda x: kernel_attention.elu_features(x.astype(np.float64))  # noqa: E731
    Y_par = kernel_attention.kernel_attention_parallel(Q, K, V, phi)
    Y_rnn, state = kernel_attention.kernel_attention_rnn(Q, K, V, phi)
    assert Y_par.dtype == Y_rnn.dtype == state.S.dtype == state.u.dtype == np.float64
    assert np.max(np.abs(Y_par - Y_rnn)) <= 1e-12 * np.max(np.abs(Y_par))


def test_rnn_mode_keeps_a_float64_state_in_float64(rng):
    Q, K, V = _qkv(rng, 4, dtype=np.float32)
    Y, state = kernel_attention.kernel_attention_rnn(Q, K, V, kernel_attention.elu_features, state=kernel_attention.initial_state(B, DV, DK))
    assert Y.dtype == state.S.dtype == np.float64


# ------------------------------------------------------------------------------------------ softmax attention

@pytest.mark.parametrize("T", [1, 7])
def test_softmax_attention_as_an_rnn_over_the_list_of_keys_equals_the_parallel_form(rng, T):
    Q, K, V = _qkv(rng, T, scale=2.0)
    Y_par = kernel_attention.softmax_attention_parallel(Q, K, V)
    assert np.max(np.abs(kernel_attention.softmax_attention_rnn(Q, K, V) - Y_par)) <= 1e-12 * np.max(np.abs(Y_par))


def test_softmax_attention_is_the_normalised_exp_kernel(rng):
    Q, K, V = _qkv(rng, 5)
    scale = 0.7
    W = np.tril(np.exp(scale * Q @ np.swapaxes(K, 1, 2)))    # exp(<q_t, k_i>) for i <= t, written out
    want = (W @ V) / W.sum(axis=2, keepdims=True)
    np.testing.assert_allclose(kernel_attention.softmax_attention_parallel(Q, K, V, scale=scale), want, rtol=1e-13)


def test_non_causal_softmax_attention_weighs_every_key_and_keeps_float32(rng):
    Q, K, V = _qkv(rng, 5, dtype=np.float32)
    W = np.exp(0.7 * Q.astype(np.float64) @ np.swapaxes(K, 1, 2))  # every key, written out in float64
    want = (W @ V) / W.sum(axis=2, keepdims=True)
    got = kernel_attention.softmax_attention_parallel(Q, K, V, scale=0.7, causal=False)
    assert got.dtype == kernel_attention.softmax_attention_rnn(Q, K, V).dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_softmax_attention_survives_large_logits(rng):
    Q, K, V = _qkv(rng, 4, scale=40.0)
    Y = kernel_attention.softmax_attention_rnn(Q, K, V)
    assert np.all(np.isfinite(Y))
    np.testing.assert_allclose(Y, kernel_attention.softmax_attention_parallel(Q, K, V), rtol=1e-12, atol=1e-12)


def test_random_feature_attention_approaches_softmax_attention(rng):
    Q, K, V = _qkv(rng, 6)
    scale = 1 / np.sqrt(DK)
    exact = kernel_attention.softmax_attention_parallel(Q, K, V)
    errors = []
    for D in (10, 10_000):
        omega = kernel_attention.sample_omega(np.random.default_rng(3), D, DK)
        # exp(scale <q, k>) = exp(<s q, s k>) with s = sqrt(scale)
        phi = lambda x: kernel_attention.random_features(np.sqrt(scale) * x, omega)  # noqa: E731
        errors.append(np.max(np.abs(kernel_attention.kernel_attention_parallel(Q, K, V, phi) - exact)))
    assert errors[1] < 0.02 and errors[1] < errors[0] / 10, errors


def test_rnn_mode_softmax_equals_the_softmax_attention_cells_parallel_forward():
    from minimal.cells import softmax_attention as cell
    for ex in cell.examples(np.random.default_rng(0)):
        y, _ = cell.forward(ex.params, ex.x, mode="parallel")
        p, x = ex.params, ex.x
        Q, K, V = x @ p["W_Q"].T, x @ p["W_K"].T, x @ p["W_V"].T
        Y = kernel_attention.softmax_attention_rnn(Q, K, V)
        if "W_O" in p:
            Y = Y @ p["W_O"].T
        np.testing.assert_allclose(Y, y, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------- bad input

def test_bad_inputs_name_the_argument(rng):
    Q, K, V = _qkv(rng, 3)
    phi = kernel_attention.elu_features
    with pytest.raises(ValueError, match="Q must have shape"):
        kernel_attention.kernel_attention_parallel(Q[0], K, V, phi)
    with pytest.raises(ValueError, match="K must have shape"):
        kernel_attention.kernel_attention_rnn(Q, K[:, :2], V, phi)
    with pytest.raises(ValueError, match="V must have shape"):
        kernel_attention.softmax_attention_parallel(Q, K, V[:1])
    with pytest.raises(ValueError, match="Q must have at least one time step"):
        kernel_attention.softmax_attention_rnn(Q[:, :0], K[:, :0], V[:, :0])
    with pytest.raises(ValueError, match="K and V must have the dtype of Q"):
        kernel_attention.kernel_attention_parallel(Q, K.astype(np.float32), V, phi)
    with pytest.raises(ValueError, match="phi must be a callable"):
        kernel_attention.kernel_attention_parallel(Q, K, V, "elu")
    with pytest.raises(ValueError, match="phi must map"):
        kernel_attention.kernel_attention_rnn(Q, K, V, lambda x: x.sum(axis=-1))
    with pytest.raises(ValueError, match="phi must give a positive kernel"):
        kernel_attention.kernel_attention_parallel(Q, K, V, lambda x: x)
    with pytest.raises(ValueError, match="phi must give a positive kernel"):
        kernel_attention.kernel_attention_rnn(Q, K, V, lambda x: x)
    with pytest.raises(ValueError, match="scale must be"):
        kernel_attention.softmax_attention_rnn(Q, K, V, scale=-1.0)
    with pytest.raises(ValueError, match="scale must be"):
        kernel_attention.softmax_attention_parallel(Q, K, V, scale=np.nan)


def test_bad_feature_map_arguments_name_the_argument(rng):
    with pytest.raises(ValueError, match="omega must have shape"):
        kernel_attention.random_features(rng.standard_normal((4, DK)), rng.standard_normal((8, DK + 1)))
    with pytest.raises(ValueError, match="x must have at least 1 dimensions"):
        kernel_attention.random_features(np.ones(()), _omega())
    with pytest.raises(ValueError, match="x must have a floating dtype"):
        kernel_attention.elu_features(np.arange(3))
    for c in (-1.0, np.inf, None, "1", 1j, True, np.array([1.0])):
        with pytest.raises(ValueError, match=r"^c must be a finite real number >= 0"):
            kernel_attention.poly2_features(rng.standard_normal((2, DK)), c=c)
    with pytest.raises(ValueError, match="n_features must be"):
        kernel_attention.sample_omega(rng, 0, DK)
    with pytest.raises(ValueError, match="dim must be"):
        kernel_attention.sample_omega(rng, 4, 1.5)


def test_bad_states_name_the_argument(rng):
    Q, K, V = _qkv(rng, 3)
    phi = kernel_attention.elu_features
    good = kernel_attention.initial_state(B, DV, DK)
    with pytest.raises(ValueError, match="state.S must have shape"):
        kernel_attention.kernel_attention_rnn(Q, K, V, phi, state=kernel_attention.initial_state(B + 1, DV, DK))
    with pytest.raises(ValueError, match="state.u must have shape"):
        kernel_attention.kernel_attention_rnn(Q, K, V, phi, state=kernel_attention.KernelState(good.S, good.u[:, :1]))
    with pytest.raises(ValueError, match="phi must give F=5"):
        kernel_attention.kernel_attention_rnn(Q, K, V, phi, state=kernel_attention.initial_state(B, DV, 5))
    with pytest.raises(ValueError, match="phi must give F=5"):
        kernel_attention.kernel_attention_step(kernel_attention.initial_state(B, DV, 5), Q[:, 0], K[:, 0], V[:, 0], phi)
    with pytest.raises(ValueError, match="v must have shape"):
        kernel_attention.kernel_attention_step(good, Q[:, 0], K[:, 0], V[:, 0, :1], phi)
    with pytest.raises(ValueError, match="k must have shape"):
        kernel_attention.kernel_attention_step(good, Q[:, 0], K[:, 0, :2], V[:, 0], phi)
    with pytest.raises(ValueError, match="batch must be"):
        kernel_attention.initial_state(0, DV, DK)
