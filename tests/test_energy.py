"""Free energy, softmax and Fisher-Rao geometry (MODEL.md §1-§2, §4 bounds, Part III).

Property-based over N in 2..8, d in 1..5, β log-uniform in [1e-3, 1e3] and random
scores and logits; every identity marked (oracle) in MODEL.md is asserted to rounding.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamics import energy as en
from dynamics.logits import logit_step
from dynamics.relaxation import relax

sizes = st.integers(2, 8)
dims = st.integers(1, 5)
log_betas = st.floats(np.log(1e-3), np.log(1e3))
seeds = st.integers(0, 2**32 - 1)


def draw(seed, N, d, score_scale=1.0, logit_scale=2.0):
    """Random features, interaction, scores and logits."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d))
    M = rng.standard_normal((d, d)) / d
    S = score_scale * en.scores(X, M)
    Z = logit_scale * rng.standard_normal((N, N))
    return rng, X, M, S, Z


def softmax_of(Z):
    return en.rowsoftmax(Z), en.log_rowsoftmax(Z)


def energy_scale(A, log_a, S, beta):
    """Size of the terms of F (rounding of F is relative to this)."""
    return float(np.sum(np.abs(A * S)) + np.sum(np.abs(A * log_a)) / beta
                 + np.sum(np.abs(S)) / S.shape[0] + S.shape[0] * np.log(S.shape[0]) / beta)


# --- §1 scores ---------------------------------------------------------------
@given(N=sizes, d=dims, seed=seeds)
def test_scores_are_bilinear_query_key_products(N, d, seed):
    _, X, M, S, _ = draw(seed, N, d)
    expected = np.einsum("ia,ab,jb->ij", X, M, X)
    np.testing.assert_allclose(S, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


# --- §1 gap identity, minimiser, gauge ----------------------------------------
@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds)
def test_gap_identity_free_energy_minus_potential_is_kl_over_beta(N, d, log_beta, seed):
    """(oracle) F(A;X) − Φ(X) = (1/β) Σ_i KL(A_i ‖ A*_i)."""
    beta = float(np.exp(log_beta))
    _, _, _, S, Z = draw(seed, N, d)
    A, log_a = softmax_of(Z)
    log_star = en.log_rowsoftmax(beta * S)
    gap = en.free_energy(A, S, beta, log_a) - en.potential(S, beta)
    kl = float(np.sum(en.kl_rows(log_a, log_star)))
    scale = energy_scale(A, log_a, S, beta)
    assert kl >= 0.0
    assert abs(gap - kl / beta) <= 1e-10 * scale
    # Without log A passed (computed from A) the identity holds too.
    assert abs(en.free_energy(A, S, beta) - en.potential(S, beta) - kl / beta) <= 1e-10 * scale


@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds)
def test_potential_is_free_energy_of_softmax_attention(N, d, log_beta, seed):
    """Φ = F(A*; X) and KL(A*‖A*) = 0."""
    beta = float(np.exp(log_beta))
    _, _, _, S, _ = draw(seed, N, d)
    A_star = en.softmax_attention(S, beta)
    log_star = en.log_rowsoftmax(beta * S)
    np.testing.assert_allclose(A_star, np.exp(log_star), rtol=1e-12, atol=1e-300)
    scale = energy_scale(A_star, log_star, S, beta)
    assert abs(en.free_energy(A_star, S, beta, log_star) - en.potential(S, beta)) <= 1e-12 * scale
    assert np.all(en.kl_rows(log_star, log_star) == 0.0)


@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds, eps=st.floats(1e-3, 3.0))
def test_softmax_attention_minimises_free_energy(N, d, log_beta, seed, eps):
    """A* is the minimiser: F at any perturbed positive A is ≥ Φ."""
    beta = float(np.exp(log_beta))
    rng, _, _, S, _ = draw(seed, N, d)
    Z = beta * S + eps * rng.standard_normal((N, N))
    A, log_a = softmax_of(Z)
    phi = en.potential(S, beta)
    F = en.free_energy(A, S, beta, log_a)
    assert F >= phi - 1e-12 * energy_scale(A, log_a, S, beta)


@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds)
def test_gauge_row_constants_change_nothing_but_shift_free_energy(N, d, log_beta, seed):
    """S_ij + g_i leaves A*, the logit step and the flow unchanged; F shifts by −Σg."""
    beta = float(np.exp(log_beta))
    rng, _, _, S, Z = draw(seed, N, d)
    g = 3.0 * rng.standard_normal((N, 1))
    Sg = S + g
    A_star, A_star_g = en.softmax_attention(S, beta), en.softmax_attention(Sg, beta)
    tol = 1e-12 * (1.0 + beta * (np.abs(Sg).max() + np.abs(g).max()))
    np.testing.assert_allclose(A_star_g, A_star, rtol=0, atol=tol)
    A, log_a = softmax_of(Z)
    dF = en.free_energy(A, Sg, beta, log_a) - en.free_energy(A, S, beta, log_a)
    assert abs(dF + g.sum()) <= 1e-12 * (energy_scale(A, log_a, Sg, beta) + np.abs(g).sum())
    # the potential shifts the same way
    assert abs(en.potential(Sg, beta) - en.potential(S, beta) + g.sum()) <= tol * N / beta * 10
    # Fisher-Rao velocity is unchanged (C shifts by a row constant)
    gamma = 0.7
    v = en.fisher_rao_velocity(A, en.marginal_costs(log_a, S, beta), gamma)
    vg = en.fisher_rao_velocity(A, en.marginal_costs(log_a, Sg, beta), gamma)
    np.testing.assert_allclose(vg, v, rtol=0, atol=1e-12 * gamma * (np.abs(Sg).max() + 1 / beta
                                                                     * np.abs(log_a).max() + 1))
    # logit dynamics unchanged (attention after one exact step)
    lam, h = gamma / beta, 0.1
    S1 = S + 0.1 * rng.standard_normal((N, N))
    A1 = en.rowsoftmax(logit_step(Z, S, S1, beta, lam, h))
    A1g = en.rowsoftmax(logit_step(Z, Sg, S1 + g, beta, lam, h))
    np.testing.assert_allclose(A1g, A1, rtol=0, atol=1e-12 * (1 + np.abs(Z).max() + beta
                                                              * np.abs(Sg).max()))


# --- §2 / §3 Fisher-Rao flow = logit flow -------------------------------------
@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds, gamma=st.floats(1e-3, 1e3))
def test_fisher_rao_velocity_equals_logit_flow_through_softmax_jacobian(
        N, d, log_beta, seed, gamma):
    """(oracle) dA/dt of §2 equals J_softmax(Z) · (γS − λZ) of §3."""
    beta = float(np.exp(log_beta))
    lam = gamma / beta
    _, _, _, S, Z = draw(seed, N, d)
    A, log_a = softmax_of(Z)
    v = en.fisher_rao_velocity(A, en.marginal_costs(log_a, S, beta), gamma)
    Z_dot = gamma * S - lam * Z
    jac = A * (Z_dot - np.sum(A * Z_dot, axis=1, keepdims=True))
    scale = gamma * (np.abs(S).max() + np.abs(log_a).max() / beta + 1.0 / beta)
    np.testing.assert_allclose(v, jac, rtol=0, atol=1e-11 * scale)
    # the flow keeps row sums: Σ_j dA_ij/dt = 0
    np.testing.assert_allclose(v.sum(axis=1), 0.0, atol=1e-12 * scale)


@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds)
def test_fisher_rao_velocity_matches_finite_difference_of_rowsoftmax(N, d, log_beta, seed):
    """A central difference of rowsoftmax along dZ/dt reproduces the Fisher-Rao velocity."""
    beta = float(np.exp(log_beta))
    gamma = 1.0
    lam = gamma / beta
    _, _, _, S, Z = draw(seed, N, d)
    A, log_a = softmax_of(Z)
    Z_dot = gamma * S - lam * Z
    Z_dot = Z_dot - Z_dot.max(axis=1, keepdims=True)  # gauge: same dA/dt
    v = en.fisher_rao_velocity(A, en.marginal_costs(log_a, S, beta), gamma)
    speed = max(np.abs(Z_dot).max(), 1e-300)
    eps = 1e-4 / speed
    fd = (en.rowsoftmax(Z + eps * Z_dot) - en.rowsoftmax(Z - eps * Z_dot)) / (2 * eps)
    # truncation ~ (eps·speed)² · speed, rounding ~ 1e-16/eps
    np.testing.assert_allclose(fd, v, rtol=0, atol=1e-7 * speed + 1e-12 / eps)


# --- §2 dissipation ----------------------------------------------------------
@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds, gamma=st.floats(1e-3, 1e3))
def test_dissipation_is_row_variance_of_log_odds(N, d, log_beta, seed, gamma):
    """D ≥ 0 and D = (λ/β) Σ_i Var_{A_i}(Z − βS)."""
    beta = float(np.exp(log_beta))
    lam = gamma / beta
    _, _, _, S, Z = draw(seed, N, d)
    A, log_a = softmax_of(Z)
    C = en.marginal_costs(log_a, S, beta)
    D = en.dissipation_rate(A, C, gamma)
    assert D >= 0.0
    var = en.row_variance(A, Z - beta * S)
    expected = lam / beta * var
    W = Z - beta * S
    scale = lam / beta * float(np.sum(A * W * W)) + 1e-300
    assert abs(D - expected) <= 1e-10 * scale
    # and it is −⟨C, dA/dt⟩ (the rate of decrease of F along the flow)
    v = en.fisher_rao_velocity(A, C, gamma)
    assert abs(float(np.sum(C * v)) + D) <= 1e-10 * (gamma * float(np.sum(A * C * C)) + 1e-300)


@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds, gamma=st.floats(1e-3, 1e3),
       eps=st.floats(1e-2, 2.0))
def test_dissipation_vanishes_exactly_at_softmax_attention(N, d, log_beta, seed, gamma, eps):
    """D = 0 ⇔ A = A*: zero to rounding at A*, strictly positive away from it."""
    beta = float(np.exp(log_beta))
    rng, _, _, S, _ = draw(seed, N, d)
    log_star = en.log_rowsoftmax(beta * S)
    A_star = np.exp(log_star)
    C_star = en.marginal_costs(log_star, S, beta)
    D_star = en.dissipation_rate(A_star, C_star, gamma)
    cost_scale = np.abs(S).max() + (1 + np.abs(log_star).max()) / beta
    assert 0.0 <= D_star <= gamma * (1e-13 * cost_scale) ** 2 * N
    # away from A*: a perturbation that is not a row constant gives D > 0
    Z = beta * S + eps * rng.standard_normal((N, N))
    A, log_a = softmax_of(Z)
    W = en.row_centred(Z - beta * S, A)
    # (a row whose attention rounds to one-hot has D = 0 in floating point: at β ≈ 970
    # Hypothesis found A with entries 1 and 0 exactly; only unsaturated rows count)
    if np.all(np.abs(W).max(axis=1) > 1e-6) and np.all(A.max(axis=1) < 1.0 - 1e-12):
        assert en.dissipation_rate(A, en.marginal_costs(log_a, S, beta), gamma) > 0.0


# --- §4 tracking consequences --------------------------------------------------
@given(N=sizes, d=dims, log_beta=log_betas, seed=seeds)
def test_kl_and_log_ratio_are_bounded_by_oscillation_of_log_odds(N, d, log_beta, seed):
    """(oracle) KL(A_i‖A*_i) ≤ osc(W_i)²/8 and max_j |log A_ij − log A*_ij| ≤ osc(W_i)."""
    beta = float(np.exp(log_beta))
    _, _, _, S, Z = draw(seed, N, d)
    log_a = en.log_rowsoftmax(Z)
    log_star = en.log_rowsoftmax(beta * S)
    W = Z - beta * S
    osc = en.oscillation(W)
    np.testing.assert_array_equal(osc, W.max(axis=1) - W.min(axis=1))
    kl = en.kl_rows(log_a, log_star)
    slack = 1e-12 * (1.0 + np.abs(Z).max() + beta * np.abs(S).max())
    assert np.all(kl <= osc**2 / 8.0 + slack)
    assert np.all(np.abs(log_a - log_star).max(axis=1) <= osc + slack)


# --- Part III: positivity and row sums for extreme β and scores ---------------
extreme = dict(N=sizes, log_beta=log_betas, seed=seeds,
               log_scale=st.floats(0.0, np.log(1e6)))


def _check_simplex(A, Z=None):
    assert np.all(np.isfinite(A))
    assert np.all(A >= 0.0)
    assert np.max(np.abs(A.sum(axis=1) - 1.0)) <= 1e-12
    if Z is not None:
        log_a = en.log_rowsoftmax(Z)
        assert np.all(np.isfinite(log_a))
        # strictly positive wherever the log-probability is representable
        representable = log_a > -700.0
        assert np.all(A[representable] > 0.0)


def _extreme_scores(seed, N, log_scale):
    rng = np.random.default_rng(seed)
    S = rng.uniform(-1.0, 1.0, (N, N))
    S *= np.exp(log_scale) / np.abs(S).max()
    return rng, S


@given(**extreme)
def test_rowsoftmax_stays_on_simplex_for_extreme_scores(N, log_beta, seed, log_scale):
    beta = float(np.exp(log_beta))
    _, S = _extreme_scores(seed, N, log_scale)
    Z = beta * S
    _check_simplex(en.rowsoftmax(Z), Z)
    _check_simplex(en.softmax_attention(S, beta), Z)


@given(**extreme, lam_h=st.floats(1e-6, 100.0))
def test_logit_step_stays_on_simplex_for_extreme_scores(N, log_beta, seed, log_scale, lam_h):
    beta = float(np.exp(log_beta))
    rng, S0 = _extreme_scores(seed, N, log_scale)
    S1 = S0 * rng.uniform(0.5, 1.5, (N, N))
    Z = rng.standard_normal((N, N))
    for _ in range(3):
        Z = logit_step(Z, S0, S1, beta, lam_h, 1.0)
        assert np.all(np.isfinite(Z)) and np.all(Z.max(axis=1) == 0.0)
        _check_simplex(en.rowsoftmax(Z), Z)
        S0, S1 = S1, S0


@given(**extreme, lam_h=st.floats(1e-6, 100.0))
def test_relax_stays_on_simplex_for_extreme_scores(N, log_beta, seed, log_scale, lam_h):
    beta = float(np.exp(log_beta))
    rng, S = _extreme_scores(seed, N, log_scale)
    Z = rng.standard_normal((N, N))
    Z1, A1, dissipated = relax(Z, S, beta, lam_h, 1.0)
    assert np.all(np.isfinite(Z1)) and np.isfinite(dissipated) and dissipated >= 0.0
    _check_simplex(A1, Z1)
    np.testing.assert_array_equal(A1, en.rowsoftmax(Z1))


# --- bad input -----------------------------------------------------------------
def test_mismatched_shapes_raise_value_error_in_scores_and_costs():
    with pytest.raises(ValueError):
        en.scores(np.ones((3, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="(?i)shape"):
        en.marginal_costs(np.zeros((3, 3)), np.zeros((4, 4)), 1.0)
