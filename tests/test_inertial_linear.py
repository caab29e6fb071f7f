"""First-order linear attention (MODEL.md §10): particles, moments, closed form."""

import numpy as np
import pytest
from helpers import few_examples, random_spd, random_sym
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from dynamics.inertial import (
    CLOUDS,
    closed_form_moments,
    first_order_blowup_time,
    fixed_step_blowup,
    initial_cloud,
    integrate_until_blowup,
    linear_velocity,
    model_matrices,
    moment_field,
    moment_trajectory,
    parse_diagonal,
    second_moment,
)
from dynamics.inertial.linear import crossing_time_closed_form, largest_eigenvalue
from dynamics.steppers.rk4 import rk4_step

FAST = few_examples(8)


def particle_solution(X0, A, V, t_eval):
    n, d = X0.shape
    sol = solve_ivp(lambda t, y: linear_velocity(y.reshape(n, d), A, V).ravel(),
                    (0, t_eval[-1]), X0.ravel(), t_eval=t_eval, method="DOP853",
                    rtol=1e-11, atol=1e-12)
    return sol.y.T.reshape(len(t_eval), n, d)


@pytest.mark.parametrize("cloud", CLOUDS)
@FAST
@given(seed=st.integers(0, 10_000), d=st.integers(1, 4), extra=st.integers(0, 12))
def test_whitened_cloud_has_exact_second_moment(cloud, seed, d, extra):
    rng = np.random.default_rng(seed)
    S0 = random_spd(rng, d)
    X = initial_cloud(cloud, d + extra + 1, d, S0, rng)
    np.testing.assert_allclose(second_moment(X), S0, rtol=0, atol=1e-12)


def test_cloud_needs_n_at_least_d():
    with pytest.raises(ValueError, match="n_tokens >= dim"):
        initial_cloud("gaussian", 3, 5, 0.5, np.random.default_rng(0))


@FAST
@given(seed=st.integers(0, 10_000))
def test_particles_match_moment_ode_for_every_cloud(seed):
    """Same S(0) → same S(t) and same blow-up time, Gaussian or not (§10 oracle)."""
    rng = np.random.default_rng(seed)
    d, n = 3, 9
    A, V = random_spd(rng, d), random_sym(rng, d, 0.2, 1.0)
    S0 = random_spd(rng, d, 0.3, 0.8)
    ref = moment_trajectory(S0, A, V, 20.0, threshold=1e6)
    assert np.isfinite(ref.blowup_time)
    T = 0.9 * ref.blowup_time
    t_eval = np.linspace(0, T, 7)
    S_ref = moment_trajectory(S0, A, V, T, t_eval=t_eval).S
    times = []
    for cloud in CLOUDS:
        X0 = initial_cloud(cloud, n, d, S0, rng)
        Xs = particle_solution(X0, A, V, t_eval)
        S = np.einsum("tni,tnj->tij", Xs, Xs) / n
        scale = np.linalg.norm(S_ref, axis=(1, 2))[:, None, None]
        np.testing.assert_allclose(S / scale, S_ref / scale, rtol=0, atol=1e-8)
        res = integrate_until_blowup(
            lambda t, y: linear_velocity(y.reshape(n, d), A, V).ravel(), X0.ravel(), 20.0,
            lambda y: largest_eigenvalue(second_moment(y.reshape(n, d))), 1e6)
        times.append(res.time)
    np.testing.assert_allclose(times, ref.blowup_time, rtol=1e-7)


@FAST
@given(a=st.lists(st.floats(0.2, 3.0), min_size=3, max_size=3),
       v=st.lists(st.floats(-2.0, 2.0).filter(lambda x: abs(x) > 0.05 or x == 0),
                  min_size=3, max_size=3),
       s=st.lists(st.floats(0.1, 2.0), min_size=3, max_size=3))
def test_closed_form_moments_and_blowup_time(a, v, s):
    a, v, s = map(np.array, (a, v, s))
    T = first_order_blowup_time(a, v, s)
    horizon = 0.95 * T if np.isfinite(T) else 10.0
    t_eval = np.linspace(0, horizon, 9)
    traj = moment_trajectory(np.diag(s), np.diag(a), np.diag(v), horizon, t_eval=t_eval)
    exact = closed_form_moments(a, v, s, t_eval)
    np.testing.assert_allclose(np.diagonal(traj.S, axis1=1, axis2=2), exact, rtol=1e-7)
    numeric = moment_trajectory(np.diag(s), np.diag(a), np.diag(v),
                                2 * T if np.isfinite(T) else 50.0,
                                threshold=1e10).blowup_time
    if np.isfinite(T):
        # s ≈ 1/(2 a v (T - t)) near T: the event at s = 1e10 is within ~1e-10 of T
        assert numeric == pytest.approx(T, rel=1e-7)
        assert T == pytest.approx(min(1 / (2 * ak * vk * sk)
                                      for ak, vk, sk in zip(a, v, s, strict=True) if vk > 0))
    else:
        assert np.all(v <= 0) and numeric == np.inf


def test_no_blowup_when_V_negative_semidefinite():
    rng = np.random.default_rng(3)
    A, V, S0 = random_spd(rng, 3), random_sym(rng, 3, -1.5, 0.0), random_spd(rng, 3)
    traj = moment_trajectory(S0, A, V, 200.0, threshold=1e6)
    assert traj.blowup_time == np.inf and traj.t[-1] == pytest.approx(200.0)
    lam = np.linalg.eigvalsh(traj.S)
    assert lam.max() <= np.linalg.eigvalsh(S0).max() + 1e-9  # V ⪯ 0: S non-increasing
    assert first_order_blowup_time([1, 2, 3], [0, -1, -0.5], [1, 1, 1]) == np.inf


def test_fixed_step_detector_finds_blowup_near_closed_form():
    a, v, s = np.array([1.0, 0.5]), np.array([1.0, 2.0]), np.array([0.5, 0.3])
    T = first_order_blowup_time(a, v, s)
    A, V = np.diag(a), np.diag(v)

    def step(t, y, h):
        return rk4_step(lambda t, y: moment_field(y.reshape(2, 2), A, V).ravel(), t, y, h)

    for h in (1e-2, 1e-3):
        found = fixed_step_blowup(step, np.diag(s).ravel(), h, 3.0,
                                  lambda y: largest_eigenvalue(y.reshape(2, 2)), 1e6)
        assert T - 10 * h <= found <= T + 2 * h
    assert fixed_step_blowup(step, np.diag(-s).ravel() * 0 + np.diag(s).ravel() * 0.01,
                             1e-2, 1.0, lambda y: largest_eigenvalue(y.reshape(2, 2)),
                             1e6) == np.inf


def test_velocity_is_V_S_A_x():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5, 3))
    A, V = random_spd(rng, 3), random_sym(rng, 3)
    S = X.T @ X / 5
    expected = np.stack([V @ S @ A @ x for x in X])
    np.testing.assert_allclose(linear_velocity(X, A, V), expected, atol=1e-13)


def test_crossing_time_closed_form_matches_solution():
    a, v, s = np.array([1.0, 2.0]), np.array([1.0, 0.25]), np.array([0.5, 0.5])
    t = crossing_time_closed_form(a, v, s, 10.0)
    assert closed_form_moments(a, v, s, [t]).max() == pytest.approx(10.0)


def test_parse_and_build_matrices():
    assert parse_diagonal("2", 3).tolist() == [2.0, 2.0, 2.0]
    assert parse_diagonal("1, 2,3", 3).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="d = 3"):
        parse_diagonal("1,2", 3)
    with pytest.raises(ValueError, match="one number"):
        parse_diagonal("a", 3)
    with pytest.raises(ValueError, match="positive definite"):
        model_matrices("1,0,1", "1", 3)
    A, V = model_matrices("1,2,3", "-1,0.5,2", 3, "random", np.random.default_rng(0))
    np.testing.assert_allclose(np.linalg.eigvalsh(A), [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(np.linalg.eigvalsh(V), [-1, 0.5, 2], atol=1e-12)
    np.testing.assert_allclose(A @ V, V @ A, atol=1e-12)
