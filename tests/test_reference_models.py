"""Reference models (MODEL.md §8): reduced Hamiltonian and first-order Transformer flow."""

import numpy as np
import pytest
from helpers import fitted_order
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from dynamics import Settings, Simulation, models, simulate
from dynamics import energy as en
from dynamics.models import Problem
from dynamics.steppers import Heun, Verlet
from dynamics.steppers.verlet import verlet


def softmax_velocity(X, M, W_V, beta):
    """Ẋ = A*(X) X W_Vᵀ written independently (§8)."""
    S = np.einsum("ia,ab,jb->ij", X, M, X)
    E = np.exp(beta * (S - S.max(axis=1, keepdims=True)))
    A = E / E.sum(axis=1, keepdims=True)
    return A @ X @ W_V.T


def transformer_reference(X0, M, W_V, beta, T):
    N, d = X0.shape
    sol = solve_ivp(lambda _t, x: softmax_velocity(x.reshape(N, d), M, W_V, beta).ravel(),
                    (0.0, T), X0.ravel(), method="DOP853", rtol=1e-13, atol=1e-14)
    assert sol.success
    return sol.y[:, -1].reshape(N, d)


# --- reduced model -----------------------------------------------------------------------
@given(N=st.integers(2, 6), d=st.integers(1, 4), seed=st.integers(0, 2**32 - 1),
       log_beta=st.floats(np.log(0.2), np.log(5.0)), k=st.floats(0.0, 3.0))
def test_reduced_force_is_minus_gradient_of_reduced_hamiltonian(N, d, seed, log_beta, k):
    """Envelope theorem: f(A*(X), X) − kX = −∇_X (Φ(X) + k‖X‖²/2)."""
    rng = np.random.default_rng(seed)
    prob = Problem(M=rng.standard_normal((d, d)) / d, W_V=np.eye(d),
                   beta=float(np.exp(log_beta)), gamma=1.0, confinement=k)
    X, P = rng.standard_normal((N, d)), rng.standard_normal((N, d))
    eps = 1e-6
    grad = np.zeros_like(X)
    for idx in np.ndindex(X.shape):
        E = np.zeros_like(X)
        E[idx] = eps
        grad[idx] = (models.get("reduced").readable["hamiltonian"](prob, X + E, P)
                     - models.get("reduced").readable["hamiltonian"](prob, X - E, P)) / (2 * eps)
    force = models.get("reduced").readable["force"](prob, X)
    np.testing.assert_allclose(force, -grad, rtol=0, atol=1e-6 * (1 + np.abs(grad).max()))


def reduced_energy_series(dt, T, seed=2):
    s = Settings(model="reduced", n_tokens=5, dim=3, seed=seed, dt=dt,
                 init_momentum="random")
    traj = simulate(s, t_end=T, every=max(1, int(round(0.1 / dt))))
    H = traj.diagnostics["hamiltonian"]
    return traj.times, H - H[0], traj.diagnostics


def test_reduced_energy_conserved_without_drift():
    """(oracle) velocity Verlet: bounded energy error, O(h²), no secular growth."""
    t, dH, diag = reduced_energy_series(0.04, 100.0)
    scale = np.abs(diag["kinetic_energy"]).max()
    err = np.abs(dH).max()
    first, second = np.abs(dH[t <= 50]).max(), np.abs(dH[t > 50]).max()
    slope = float(np.polyfit(t, dH, 1)[0])
    print(f"reduced dt=0.04, t≤100: max|H−H0| {err:.3e} (first half {first:.3e}, "
          f"second half {second:.3e}), fitted drift {slope:.2e} per unit time")
    assert err <= 1e-3 * scale
    assert second <= 2.0 * first  # bounded oscillation, no secular growth
    assert abs(slope) * 100.0 <= 0.2 * err
    assert np.all(diag["dissipated"] == 0.0)
    np.testing.assert_allclose(diag["energy_residual"], dH, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(diag["kl"], 0.0, atol=1e-12)


def test_reduced_energy_error_is_second_order():
    steps, errors = [], []
    for dt in (0.04, 0.02, 0.01):
        _, dH, _ = reduced_energy_series(dt, 10.0)
        steps.append(dt)
        errors.append(np.abs(dH).max())
    order = fitted_order(steps, errors)
    print(f"reduced max|H−H0| over t≤10: {errors} for dt {steps}, measured order {order:.3f}")
    assert Verlet.order == 2
    assert order >= 1.8


def test_verlet_is_symplectic_and_time_reversible():
    """One step forward then back with −P returns the start (to rounding)."""
    rng = np.random.default_rng(0)
    prob = Problem(M=rng.standard_normal((3, 3)) / 3, W_V=np.eye(3), beta=1.5, gamma=1.0,
                   confinement=1.0)
    X, P = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))

    def force(U):
        return models.get("reduced").readable["force"](prob, U)

    X1, P1 = verlet(X, P, force, 1.3, 0.05)
    X2, P2 = verlet(X1, -P1, force, 1.3, 0.05)
    np.testing.assert_allclose(X2, X, atol=1e-13)
    np.testing.assert_allclose(-P2, P, atol=1e-13)


def test_canonical_approaches_reduced_as_gamma_grows():
    """(oracle) feature distance at t = 2 decreases monotonically over γ = 1 … 1000."""
    common = dict(n_tokens=5, dim=3, seed=4, beta=1.0, dt=0.01, init_momentum="random")
    X_red = simulate(Settings(model="reduced", **common), t_end=2.0, every=200).features[-1]
    gaps = []
    for gamma in (1.0, 10.0, 100.0, 1000.0):
        X = simulate(Settings(model="canonical", gamma=gamma, init_attention="softmax",
                              **common), t_end=2.0, every=200).features[-1]
        gaps.append(float(np.abs(X - X_red).max()))
    print(f"canonical vs reduced at t=2, γ=1,10,100,1000: {gaps}")
    assert all(b < a for a, b in zip(gaps[:-1], gaps[1:], strict=True))
    assert gaps[-1] <= 1e-2 * gaps[0]


# --- first-order Transformer flow -------------------------------------------------------
def test_residual_layer_one_step_error_is_second_order():
    """(oracle) X + h A*(X) X W_Vᵀ differs from the flow by O(h²) after one step."""
    rng = np.random.default_rng(8)
    d = 3
    prob = Problem(M=rng.standard_normal((d, d)) / d, W_V=rng.standard_normal((d, d)) / d,
                   beta=2.0, gamma=1.0)
    X = rng.standard_normal((6, d))
    np.testing.assert_allclose(models.get("transformer").readable["velocity"](prob, X),
                               softmax_velocity(X, prob.M, prob.W_V, prob.beta), atol=1e-14)
    steps = np.array([0.2, 0.1, 0.05, 0.025, 0.0125])
    errors = [np.abs(models.get("transformer").readable["layer"](prob, X, h)
                     - transformer_reference(X, prob.M, prob.W_V, prob.beta, h)).max()
              for h in steps]
    order = fitted_order(steps, errors)
    print(f"residual layer one-step errors {errors}, measured order {order:.3f}")
    assert 1.8 <= order <= 2.2


def test_transformer_simulation_is_second_order():
    base = Settings(model="transformer", n_tokens=5, dim=3, seed=9, beta=2.0)
    sim = Simulation(base)
    prob = sim.problem
    X_ref = transformer_reference(sim.state.X, prob.M, prob.W_V, prob.beta, 1.0)
    steps, errors = [], []
    for dt in (0.1, 0.05, 0.025, 0.0125):
        frame = Simulation(base.copy(dt=dt)).step(int(round(1.0 / dt)))
        steps.append(dt)
        errors.append(np.abs(frame.features - X_ref).max())
        # attention is slaved to the softmax
        np.testing.assert_allclose(frame.attention, frame.softmax, atol=1e-14)
    order = fitted_order(steps, errors)
    print(f"transformer Simulation vs solve_ivp at t=1: errors {errors}, "
          f"measured order {order:.3f}")
    assert Heun.order == 2
    assert order >= 1.8


def test_reduced_simulation_matches_reference():
    """The reduced model's Simulation converges at order 2 to a tight reference."""
    base = Settings(model="reduced", n_tokens=5, dim=3, seed=9, init_momentum="random")
    sim = Simulation(base)
    prob, N, d = sim.problem, 5, 3

    def rhs(_t, y):
        X, P = y[:N * d].reshape(N, d), y[N * d:].reshape(N, d)
        S = np.einsum("ia,ab,jb->ij", X, prob.M, X)
        E = np.exp(prob.beta * (S - S.max(axis=1, keepdims=True)))
        A = E / E.sum(axis=1, keepdims=True)
        f = A @ X @ prob.M.T + A.T @ X @ prob.M - prob.confinement * X
        return np.concatenate([(P / prob.mass).ravel(), f.ravel()])

    sol = solve_ivp(rhs, (0, 1.0), np.concatenate([sim.state.X.ravel(), sim.state.P.ravel()]),
                    method="DOP853", rtol=1e-12, atol=1e-13)
    X_ref = sol.y[:N * d, -1].reshape(N, d)
    steps, errors = [], []
    for dt in (0.05, 0.025, 0.0125):
        frame = Simulation(base.copy(dt=dt)).step(int(round(1.0 / dt)))
        steps.append(dt)
        errors.append(np.abs(frame.features - X_ref).max())
    order = fitted_order(steps, errors)
    print(f"reduced Simulation vs solve_ivp at t=1: errors {errors}, order {order:.3f}")
    assert order >= 1.8


@pytest.mark.parametrize("model", ["reduced", "transformer"])
def test_slaved_models_report_no_lag(model):
    d = simulate(Settings(model=model, n_tokens=4, dim=2, dt=0.05), t_end=1.0).diagnostics
    np.testing.assert_allclose(d["kl"], 0.0, atol=1e-13)
    np.testing.assert_array_equal(d["dissipation_rate"], 0.0)
    np.testing.assert_allclose(d["free_energy"], d["potential"],
                               atol=1e-12 * np.abs(d["potential"]).max())
    if model == "transformer":
        assert np.all(np.isnan(d["energy_residual"]))


def test_transformer_potential_is_log_sum_exp_energy():
    """Φ reported by the transformer model is −(1/β) Σ logsumexp(βS) at its features."""
    sim = Simulation(Settings(model="transformer", n_tokens=4, dim=3, beta=3.0))
    frame = sim.step(20)
    S = en.scores(frame.features, sim.problem.M)
    assert frame.diagnostics["potential"] == pytest.approx(en.potential(S, 3.0), rel=1e-13)
