"""Accelerated linear attention (MODEL.md §11): energy laws, moments, blow-up."""

import numpy as np
import pytest
from helpers import few_examples, random_spd, random_sym
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import quad, solve_ivp

from dynamics.inertial import (
    Damping,
    accelerated_blowup_time,
    accelerated_dissipation,
    accelerated_force,
    accelerated_hamiltonian,
    accelerated_trajectory,
    accelerated_velocity,
    first_order_blowup_time,
    initial_cloud,
    matrix_dissipation,
    matrix_field,
    matrix_hamiltonian,
    second_moment,
    undamped_blowup_time,
)
from dynamics.steppers.rk4 import rk4_step

FAST = few_examples(6)
DAMPINGS = [Damping("constant", 0.0), Damping("constant", 0.8),
            Damping("nesterov", 0.2, 3.0, 1.0)]


def augmented_particle_field(A, V, damping, n, d):
    """(X, Y, E) with Ė = −α Σ y·∂H/∂y, so H(t) − H(0) − E(t) is the energy-law residual."""
    def f(t, z):
        X, Y = z[: n * d].reshape(n, d), z[n * d: 2 * n * d].reshape(n, d)
        a = float(damping.rate(t))
        dX = accelerated_velocity(X, Y, A)
        dY = -a * Y + accelerated_force(X, Y, A, V)
        return np.concatenate([dX.ravel(), dY.ravel(), [-a * np.sum(Y * dX)]])
    return f


def energy_residual_rk4(X0, Y0, A, V, damping, T, h):
    n, d = X0.shape
    f = augmented_particle_field(A, V, damping, n, d)
    z = np.concatenate([X0.ravel(), Y0.ravel(), [0.0]])
    for k in range(int(round(T / h))):
        z = rk4_step(f, k * h, z, h)
    X, Y = z[: n * d].reshape(n, d), z[n * d: 2 * n * d].reshape(n, d)
    return (accelerated_hamiltonian(X, Y, A, V) - accelerated_hamiltonian(X0, Y0, A, V)
            - z[-1])


@pytest.mark.parametrize("damping", DAMPINGS, ids=["alpha0", "constant", "nesterov"])
def test_particle_energy_law_and_its_order(damping):
    """dH/dt = −α Σ y_i·∂H/∂y_i: the residual is tiny and shrinks at the RK4 order."""
    rng = np.random.default_rng(7)
    n, d = 8, 3
    X0 = initial_cloud("gaussian", n, d, 0.3, rng)
    Y0 = 0.3 * rng.standard_normal((n, d))
    A, V = random_spd(rng, d), random_sym(rng, d)
    res = [abs(energy_residual_rk4(X0, Y0, A, V, damping, 1.0, h)) for h in (0.05, 0.025)]
    print(f"energy-law residuals {res}, ratio {res[0] / res[1]:.1f}")
    assert res[1] < 1e-6
    assert res[0] / res[1] > 12  # order 4 → ratio 16
    # tight adaptive reference: the law holds to solver tolerance
    f = augmented_particle_field(A, V, damping, n, d)
    sol = solve_ivp(f, (0, 1.0), np.concatenate([X0.ravel(), Y0.ravel(), [0.0]]),
                    method="DOP853", rtol=1e-12, atol=1e-12)
    z = sol.y[:, -1]
    X, Y = z[: n * d].reshape(n, d), z[n * d: 2 * n * d].reshape(n, d)
    H1 = accelerated_hamiltonian(X, Y, A, V)
    assert abs(H1 - accelerated_hamiltonian(X0, Y0, A, V) - z[-1]) < 1e-9
    if damping.c == 0 and damping.kind == "constant":
        assert abs(z[-1]) < 1e-14


@FAST
@given(seed=st.integers(0, 10_000), damping=st.sampled_from(DAMPINGS))
def test_momenta_stay_linear_and_particles_match_matrix_system(seed, damping):
    """y_i = P x_i is preserved; the particle S, P agree with the (S, P) system."""
    rng = np.random.default_rng(seed)
    n, d = 7, 3
    X0 = initial_cloud("student_t", n, d, random_spd(rng, d, 0.2, 0.5), rng)
    P0 = random_sym(rng, d, -0.5, 0.5)
    A, V = random_spd(rng, d), random_sym(rng, d)
    t_eval = np.linspace(0, 0.8, 5)
    f = augmented_particle_field(A, V, damping, n, d)
    sol = solve_ivp(f, (0, 0.8), np.concatenate([X0.ravel(), (X0 @ P0).ravel(), [0.0]]),
                    t_eval=t_eval, method="DOP853", rtol=1e-12, atol=1e-12)
    traj = accelerated_trajectory(A, V, second_moment(X0), P0, damping, 0.8, t_eval=t_eval)
    for k in range(len(t_eval)):
        X = sol.y[: n * d, k].reshape(n, d)
        Y = sol.y[n * d: 2 * n * d, k].reshape(n, d)
        np.testing.assert_allclose(second_moment(X), traj.S[k], atol=1e-8)
        np.testing.assert_allclose(Y, X @ traj.P[k], atol=1e-8)
        # particle H is N times the matrix H
        assert accelerated_hamiltonian(X, Y, A, V) == pytest.approx(
            n * matrix_hamiltonian(traj.S[k], traj.P[k], A, V), abs=1e-8)
        assert accelerated_dissipation(X, Y, A) == pytest.approx(
            n * matrix_dissipation(traj.S[k], traj.P[k], A), abs=1e-8)


@pytest.mark.parametrize("damping", DAMPINGS, ids=["alpha0", "constant", "nesterov"])
def test_matrix_energy_law(damping):
    """dH/dt = −α tr(A S P² S) for the (S, P) system."""
    rng = np.random.default_rng(11)
    d = 3
    A, V = random_spd(rng, d), random_sym(rng, d)
    S0, P0 = random_spd(rng, d, 0.2, 0.6), random_sym(rng, d, -0.5, 0.5)

    def f(t, y):
        S, P = y[:9].reshape(3, 3), y[9:18].reshape(3, 3)
        a = float(damping.rate(t))
        dS, dP = matrix_field(S, P, A, V, a)
        return np.concatenate([dS.ravel(), dP.ravel(), [-a * matrix_dissipation(S, P, A)]])

    sol = solve_ivp(f, (0, 1.5), np.concatenate([S0.ravel(), P0.ravel(), [0.0]]),
                    method="DOP853", rtol=1e-12, atol=1e-13)
    y = sol.y[:, -1]
    H1 = matrix_hamiltonian(y[:9].reshape(3, 3), y[9:18].reshape(3, 3), A, V)
    assert abs(H1 - matrix_hamiltonian(S0, P0, A, V) - y[-1]) < 1e-10


def test_scalar_blowup_times():
    """a = v = 1, s0 = 0.5, p0 = 0 (MODEL.md §11 scalar check)."""
    one = np.eye(1)
    t_first = first_order_blowup_time(1, 1, 0.5)
    t0 = accelerated_blowup_time(one, one, 0.5 * one, 0 * one, Damping("constant", 0.0))
    t1 = accelerated_blowup_time(one, one, 0.5 * one, 0 * one, Damping("constant", 1.0))
    assert t_first == 1.0
    # exact for α = 0 from conservation of H: T = π / (2 √(a v s0)) = π/√2 ≈ 2.2214
    assert t0 == pytest.approx(np.pi / np.sqrt(2), abs=1e-4)
    assert t_first < t0 < t1 < np.inf
    # MODEL.md quotes ≈ 3.22 and ≈ 3.76: those are the event times of a clock that
    # starts at t0 = 1 (3.22 = 1 + π/√2); the durations are 2.22 and 2.76.
    s0 = accelerated_blowup_time(one, one, 0.5 * one, 0 * one, Damping("constant", 0.0),
                                 t_start=1.0)
    s1 = accelerated_blowup_time(one, one, 0.5 * one, 0 * one, Damping("constant", 1.0),
                                 t_start=1.0)
    assert s0 == pytest.approx(3.22, abs=0.02)
    assert s1 == pytest.approx(3.76, abs=0.02)


@FAST
@given(a=st.floats(0.2, 3.0), v=st.floats(0.2, 3.0), s=st.floats(0.1, 2.0))
def test_undamped_blowup_closed_form(a, v, s):
    d = Damping("constant", 0.0)
    numeric = accelerated_blowup_time(np.diag([a, 1.0]), np.diag([v, -1.0]),
                                      np.diag([s, 0.5]), np.zeros((2, 2)), d, threshold=1e12)
    assert numeric == pytest.approx(undamped_blowup_time([a, 1.0], [v, -1.0], [s, 0.5]),
                                    abs=1e-4)


@pytest.mark.parametrize("damping", DAMPINGS, ids=["alpha0", "constant", "nesterov"])
def test_no_blowup_when_V_negative_semidefinite(damping):
    """Commuting data with V ⪯ 0 and P(0) = 0: global existence (§11 oracle)."""
    rng = np.random.default_rng(5)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    A, V, S0 = ((q * diag) @ q.T for diag in ([0.5, 1.0, 2.0], [-1.0, 0.0, -0.3],
                                               [0.4, 1.0, 0.7]))
    # undamped, s_k → 0 and p_k → ∞ exponentially: the problem gets stiff, keep it short
    horizon = 10.0 if damping.c == 0 and damping.kind == "constant" else 40.0
    traj = accelerated_trajectory(A, V, S0, np.zeros((3, 3)), damping, horizon,
                                  threshold=1e6)
    assert traj.blowup_time == np.inf and traj.t[-1] == pytest.approx(horizon)
    assert np.all(np.isfinite(traj.S)) and np.linalg.eigvalsh(traj.S).max() < 10


@pytest.mark.parametrize("damping", DAMPINGS[1:], ids=["constant", "nesterov"])
def test_damping_decay_is_exp_of_integral(damping):
    for t, h in [(0.0, 0.1), (2.5, 0.3)]:
        integral = quad(lambda s: float(damping.rate(s)), t, t + h)[0]
        assert damping.decay(t, h) == pytest.approx(np.exp(-integral), rel=1e-12)
