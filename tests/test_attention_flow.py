"""The attention flow on prescribed paths (MODEL.md §3-§5, Part III stiffness).

Orders are measured by fitting log-error against log-step (diffrax style) and
compared with tight ``scipy.integrate.solve_ivp`` references written here from
MODEL.md, independently of the backend.
"""

import numpy as np
import pytest
from helpers import fitted_order
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from dynamics import PATHS, Settings, Simulation, simulate
from dynamics import energy as en
from dynamics.logits import hermite_logit_step, logit_step
from dynamics.steppers import ExactLogit

FEW = settings(max_examples=12)


def centred(Z):
    return Z - Z.max(axis=1, keepdims=True)


def logit_reference(Z0, score_at, beta, lam, T, extra=None):
    """Tight solution of dZ/dt = γS(t) − λZ (MODEL.md §3), γ = λβ; returns Z(T)."""
    N = Z0.shape[0]
    gamma = lam * beta

    def rhs(t, z):
        Z = z.reshape(Z0.shape)
        return (gamma * score_at(t) - lam * Z).ravel()

    sol = solve_ivp(rhs, (0.0, T), Z0.ravel(), method="DOP853", rtol=1e-12, atol=1e-12)
    assert sol.success
    return sol.y[:, -1].reshape(N, -1)


# --- §3 exact step ----------------------------------------------------------------
@FEW
@given(N=st.integers(2, 6), seed=st.integers(0, 2**32 - 1),
       log_beta=st.floats(np.log(1e-2), np.log(1e2)), lam_h=st.floats(1e-6, 20.0))
def test_logit_step_is_exact_for_scores_linear_in_time(N, seed, log_beta, lam_h):
    """Z_{n+1} of §3 equals the solution of the logit ODE when S is linear over the step."""
    rng = np.random.default_rng(seed)
    beta, h = float(np.exp(log_beta)), 0.3
    lam = lam_h / h
    Z0 = rng.standard_normal((N, N))
    S0, S1 = rng.standard_normal((N, N)), rng.standard_normal((N, N))
    ref = logit_reference(Z0, lambda t: S0 + (t / h) * (S1 - S0), beta, lam, h)
    got = logit_step(Z0, S0, S1, beta, lam, h)
    scale = 1.0 + np.abs(Z0).max() + beta * max(np.abs(S0).max(), np.abs(S1).max())
    np.testing.assert_allclose(got, centred(ref), rtol=0, atol=1e-9 * scale)


@FEW
@given(N=st.integers(2, 6), seed=st.integers(0, 2**32 - 1),
       log_beta=st.floats(np.log(1e-2), np.log(1e2)), lam_h=st.floats(1e-3, 200.0))
def test_hermite_logit_step_is_exact_for_scores_cubic_in_time(N, seed, log_beta, lam_h):
    """The stiff steps' logit step equals the solution of the logit ODE when S is a cubic
    in time, given by its values and rates at both ends (the moments of its weights by
    series below λh = 1 and by recursion above)."""
    rng = np.random.default_rng(seed)
    beta, h = float(np.exp(log_beta)), 0.3
    lam = lam_h / h
    Z0 = rng.standard_normal((N, N))
    C = rng.standard_normal((4, N, N))  # S(t) = Σ_k C_k (t/h)^k

    def S_at(t):
        return sum(c * (t / h) ** k for k, c in enumerate(C))

    def S_dot_at(t):
        return sum(k * c * (t / h) ** (k - 1) / h for k, c in enumerate(C) if k)

    ref = logit_reference(Z0, S_at, beta, lam, h)
    got = hermite_logit_step(Z0, S_at(0.0), S_at(h), S_dot_at(0.0), S_dot_at(h), beta, lam, h)
    scale = 1.0 + np.abs(Z0).max() + beta * np.abs(C).sum(axis=0).max()
    np.testing.assert_allclose(got, centred(ref), rtol=0, atol=1e-9 * scale)


def test_logit_step_is_second_order_on_rotation_path():
    """Nonlinear S(t): the global error of the exact step falls like h² (fitted)."""
    sim = Simulation(Settings(model="attention", path="rotation", n_tokens=5, dim=3,
                              omega=2.0, beta=1.5, gamma=2.0, init_attention="random", seed=4))
    prob, path, Z0 = sim.problem, sim.problem.path, sim.state.Z
    beta, lam, T = prob.beta, prob.relaxation_rate, 1.0

    def S_at(t):
        return en.scores(path(t)[0], prob.M)

    ref = en.rowsoftmax(logit_reference(Z0, S_at, beta, lam, T))
    steps, errors = [], []
    for n in (10, 20, 40, 80):
        h = T / n
        Z = Z0
        for k in range(n):
            Z = logit_step(Z, S_at(k * h), S_at((k + 1) * h), beta, lam, h)
        steps.append(h)
        errors.append(np.abs(en.rowsoftmax(Z) - ref).max())
    order = fitted_order(steps, errors)
    print(f"logit_step on rotation path: errors {errors}, measured order {order:.3f}")
    assert ExactLogit.order == 2
    assert 1.8 <= order <= 2.3


@pytest.mark.parametrize("path", ["rotation", "oscillation", "converging"])
def test_attention_simulation_converges_at_order_two(path):
    """The attention-model Simulation vs a tight solve_ivp reference at t = 1."""
    base = Settings(model="attention", path=path, n_tokens=4, dim=3, omega=1.5,
                    amplitude=0.8, beta=2.0, gamma=1.0, init_attention="random", seed=2)
    sim0 = Simulation(base)
    prob, fpath = sim0.problem, sim0.problem.path
    ref = en.rowsoftmax(logit_reference(
        sim0.state.Z, lambda t: en.scores(fpath(t)[0], prob.M), prob.beta,
        prob.relaxation_rate, 1.0))
    steps, errors = [], []
    for dt in (0.1, 0.05, 0.025, 0.0125):
        sim = Simulation(base.copy(dt=dt))
        frame = sim.step(int(round(1.0 / dt)))
        assert frame.t == pytest.approx(1.0, abs=1e-12)
        steps.append(dt)
        errors.append(np.abs(frame.attention - ref).max())
    order = fitted_order(steps, errors)
    print(f"attention Simulation ({path}): errors {errors}, measured order {order:.3f}")
    assert order >= 1.8


# --- §4 fixed features: KL decays like e^{-2λt} -------------------------------------
@pytest.mark.parametrize("beta, gamma", [(1.0, 1.0), (2.0, 1.0), (0.5, 0.25)])
def test_late_time_log_kl_slope_is_minus_two_lambda(beta, gamma):
    """(oracle) on the static path the fitted slope of log KL → −2λ (within 2 %)."""
    lam = gamma / beta
    s = Settings(model="attention", path="static", n_tokens=5, dim=3, beta=beta,
                 gamma=gamma, init_attention="random", seed=1, dt=0.05)
    traj = simulate(s, t_end=10.0 / lam, every=4)
    t, kl = traj.times, traj.diagnostics["kl"]
    late = t >= 6.0 / lam
    slope = float(np.polyfit(t[late], np.log(kl[late]), 1)[0])
    print(f"static path β={beta} γ={gamma}: fitted slope {slope:.5f}, −2λ = {-2 * lam:.5f}")
    assert slope == pytest.approx(-2.0 * lam, rel=0.02)
    assert np.all(np.diff(kl) <= 1e-15)  # the lag only shrinks on fixed features


# --- §4 two-source lag -----------------------------------------------------------------
@pytest.mark.parametrize("lam, omega", [(1.0, 2.0), (3.0, 0.5), (0.5, 5.0)])
def test_two_source_lag_amplitude(lam, omega):
    """(oracle) score difference δ sin ωt: log-odds lag amplitude βδω/√(λ²+ω²)."""
    beta, delta = 2.0, 0.7
    h = 0.02 / max(lam, omega)
    T_transient = 12.0 / lam
    period = 2 * np.pi / omega
    n = int(np.ceil((T_transient + 3 * period) / h))

    def S_at(t):
        return np.array([[delta * np.sin(omega * t), 0.0]])

    Z = np.zeros((1, 2))
    lags = []
    for k in range(n):
        Z = logit_step(Z, S_at(k * h), S_at((k + 1) * h), beta, lam, h)
        t = (k + 1) * h
        if t >= T_transient:
            W = Z - beta * S_at(t)
            lags.append(W[0, 0] - W[0, 1])
    amplitude = np.max(np.abs(lags))
    expected = beta * delta * omega / np.sqrt(lam**2 + omega**2)
    print(f"two-source lag λ={lam} ω={omega}: amplitude {amplitude:.6f}, theory {expected:.6f}")
    assert amplitude == pytest.approx(expected, rel=0.01)


# --- §4 the tracking bound holds everywhere --------------------------------------------
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("beta, gamma", [(1.0, 1.0), (4.0, 0.5), (0.5, 5.0)])
def test_kl_never_exceeds_tracking_bound_on_any_path(path, beta, gamma):
    for seed in (0, 1):
        for init in ("uniform", "random"):
            s = Settings(model="attention", path=path, n_tokens=4, dim=3, beta=beta,
                         gamma=gamma, seed=seed, init_attention=init, dt=0.02,
                         omega=2.0, amplitude=1.0, switch_time=1.0)
            d = simulate(s, t_end=2.0).diagnostics
            assert np.all(d["kl"] <= d["kl_bound"] * (1 + 1e-9) + 1e-14), (seed, init)


@pytest.mark.parametrize("beta, gamma", [(1.0, 1.0), (4.0, 0.5), (0.5, 5.0)])
def test_kl_never_exceeds_tracking_bound_canonical(beta, gamma):
    for seed in (0, 1, 2):
        s = Settings(model="canonical", n_tokens=4, dim=3, beta=beta, gamma=gamma,
                     seed=seed, init_attention="random", init_momentum="random", dt=0.02)
        d = simulate(s, t_end=3.0).diagnostics
        assert np.all(d["kl"] <= d["kl_bound"] * (1 + 1e-9) + 1e-14), seed


# --- §5 energy balance on prescribed paths -----------------------------------------------
def balance_reference(sim, T):
    """F(T) − F(0), ∫ −⟨A, dS/dt⟩ and ∫ D along a tight solution (MODEL.md §5)."""
    prob, path, Z0 = sim.problem, sim.problem.path, sim.state.Z
    beta, gamma, lam, N = prob.beta, prob.gamma, prob.relaxation_rate, Z0.shape[0]

    def rhs(t, y):
        Z = y[:-2].reshape(N, N)
        X, X_dot = path(t)
        S = en.scores(X, prob.M)
        S_dot = X_dot @ prob.M @ X.T + X @ prob.M @ X_dot.T
        A = en.rowsoftmax(Z)
        W = Z - beta * S
        Wc = W - np.sum(A * W, axis=1, keepdims=True)
        D = lam / beta * np.sum(A * Wc * Wc)
        return np.concatenate([(gamma * S - lam * Z).ravel(), [-np.sum(A * S_dot), D]])

    sol = solve_ivp(rhs, (0, T), np.concatenate([Z0.ravel(), [0.0, 0.0]]),
                    method="DOP853", rtol=1e-12, atol=1e-13)
    ZT = sol.y[:-2, -1].reshape(N, N)
    ST = en.scores(path(T)[0], prob.M)
    FT = en.free_energy(en.rowsoftmax(ZT), ST, beta, en.log_rowsoftmax(ZT))
    F0 = en.free_energy(sim.state.A, sim.state.S, beta, en.log_rowsoftmax(Z0))
    return FT - F0, sol.y[-2, -1], sol.y[-1, -1]


@pytest.mark.parametrize("path", ["rotation", "oscillation", "drift"])
def test_energy_balance_identity_and_streaming_order(path):
    """(oracle) F(t) − F(0) = ∫(−⟨A, dS/dt⟩ − D): exact for the reference; the streaming
    residual is small and shrinks at order ≥ 1.8; work and dissipated converge at order 2."""
    base = Settings(model="attention", path=path, n_tokens=5, dim=3, beta=2.0, gamma=1.0,
                    omega=2.0, amplitude=0.8, init_attention="random", seed=3)
    T = 2.0
    dF, work_ref, diss_ref = balance_reference(Simulation(base), T)
    assert abs(dF - work_ref + diss_ref) <= 1e-9 * (abs(work_ref) + diss_ref)
    steps, residuals, errors = [], [], []
    for dt in (0.04, 0.02, 0.01):
        d = simulate(base.copy(dt=dt), t_end=T).diagnostics
        steps.append(dt)
        residuals.append(np.abs(d["energy_residual"]).max())
        errors.append(abs(d["work"][-1] - work_ref) + abs(d["dissipated"][-1] - diss_ref))
        scale = d["dissipated"][-1]
    order = fitted_order(steps, residuals)
    order_wd = fitted_order(steps, errors)
    print(f"attention {path}: max|residual| {residuals} (÷dissipated at dt=0.01: "
          f"{residuals[-1] / scale:.2e}), residual order {order:.3f}; "
          f"work+dissipated errors {errors}, order {order_wd:.3f}")
    assert residuals[-1] <= 1e-3 * scale
    assert order >= 1.8
    assert order_wd >= 1.8


def test_switch_path_jump_work_is_accounted():
    """The jump at t_s does work ⟨A, ΔS⟩ exactly; the balance residual stays small."""
    s = Settings(model="attention", path="switch", n_tokens=5, dim=3, beta=2.0, gamma=1.0,
                 amplitude=1.0, switch_time=1.005, dt=0.01, seed=6)
    traj = simulate(s, t_end=3.0)
    d = traj.diagnostics
    jump = np.searchsorted(traj.times, 1.005)
    assert traj.times[jump] == pytest.approx(1.005, abs=1e-12)  # the step stops on the jump
    assert abs(d["work"][jump] - d["work"][jump - 1]) > 1e-2    # the jump did work
    assert np.all(d["work"][: jump] == 0.0)                      # static before and after
    assert np.all(d["work"][jump:] == d["work"][jump])
    # the jump's work is −⟨A(t_s), S(X_1) − S(X_0)⟩ with attention frozen across it
    sim = Simulation(s)
    M = sim.problem.M
    dS = en.scores(traj.features[jump], M) - en.scores(traj.features[jump - 1], M)
    assert d["work"][jump] == pytest.approx(-np.sum(traj.attention[jump] * dS), rel=1e-12)
    resid = np.abs(d["energy_residual"]).max()
    print(f"switch path: max|residual| {resid:.3e}, dissipated {d['dissipated'][-1]:.4f}")
    assert resid <= 1e-4 * (d["dissipated"][-1] + abs(d["work"][-1]))


@pytest.mark.parametrize("path", ["rotation", "drift"])
def test_tracking_bound_solves_its_ode(path):
    """kl_bound = Σ B_i²/8 with dB_i/dt = −λB_i + β osc(dS_i/dt), B_i(0) = osc(W_i(0))."""
    s = Settings(model="attention", path=path, n_tokens=4, dim=3, beta=2.0, gamma=1.0,
                 omega=1.5, amplitude=0.8, init_attention="random", seed=8, dt=0.01)
    sim = Simulation(s)
    prob, fpath = sim.problem, sim.problem.path
    beta, lam = prob.beta, prob.relaxation_rate

    def osc_rate(t):
        X, X_dot = fpath(t)
        S_dot = X_dot @ prob.M @ X.T + X @ prob.M @ X_dot.T
        return S_dot.max(axis=1) - S_dot.min(axis=1)

    W0 = sim.state.Z - beta * sim.state.S
    sol = solve_ivp(lambda t, B: -lam * B + beta * osc_rate(t), (0, 1.0),
                    W0.max(axis=1) - W0.min(axis=1), rtol=1e-10, atol=1e-12,
                    method="DOP853")
    expected = float(np.sum(sol.y[:, -1] ** 2) / 8.0)
    got = sim.step(100).diagnostics["kl_bound"]
    print(f"tracking bound ({path}) at t=1: {got:.8f} vs ODE {expected:.8f}")
    assert got == pytest.approx(expected, rel=1e-3)
