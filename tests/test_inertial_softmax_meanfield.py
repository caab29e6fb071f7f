"""Inertial softmax attention in mean-field normalisation (Theory page: "Inertial softmax
attention"): the readable terms and the fused kernels against a per-token loop, the
energy law against an independent quadrature, the overdamped limit, the stop test, and
every preset of the inertial lab."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import simpson, solve_ivp, trapezoid

from dynamics import Settings, Simulation, models
from dynamics.inertial import (
    Damping,
    inertial_dissipation,
    inertial_force,
    inertial_hamiltonian,
    inertial_kinetic,
    inertial_velocity,
    initial_cloud,
    softmax_velocity,
    value_kernel_ratio,
)
from dynamics.inertial.softmax import inertial_measures, inertial_parts, log_mean_partition
from dynamics.models.softmax_inertial import InertialProblem
from dynamics.steppers import RK4
from dynamics.workspace import Workspace

#: The inertial lab streams each softmax model for 60 frames of 5 steps of dt.
LAB_STEPS = 300
PRESETS = Path(__file__).resolve().parents[1] / "assets" / "presets" / "inertial.json"


def spd(rng, d, lo=0.5, hi=1.5):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * rng.uniform(lo, hi, d)) @ q.T


def non_commuting(seed, n=6, d=3, scale=0.5):
    """``A``, ``B`` symmetric positive definite in different bases, so that
    ``V = B A`` is not symmetric; ``X``, ``Y`` random."""
    rng = np.random.default_rng(seed)
    A, B = spd(rng, d), spd(rng, d)
    V = B @ A
    assert np.abs(V - V.T).max() > 1e-2
    X = scale * rng.standard_normal((n, d))
    Y = 0.3 * rng.standard_normal((n, d))
    return X, Y, A, V, B


def per_token(X, Y, A, B):
    """The Theory page's formulas token by token (loops over i and j, raw exponentials):
    ``(ẋ, −∂H/∂x, H, Σ_i y_iᵀ B y_i / z_i)``."""
    n, d = X.shape
    z = np.array([sum(math.exp(X[i] @ A @ X[j]) for j in range(n)) / n for i in range(n)])
    r = np.array([Y[i] @ B @ Y[i] / z[i] ** 2 for i in range(n)])
    velocity = np.array([B @ Y[i] / z[i] for i in range(n)])
    force = np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            force[i] += math.exp(X[i] @ A @ X[j]) * (r[i] + r[j] + 2.0) * (A @ X[j])
    force /= 2 * n
    kinetic = sum(Y[i] @ B @ Y[i] / z[i] for i in range(n))
    H = 0.5 * kinetic - sum(math.exp(X[i] @ A @ X[j]) for i in range(n)
                            for j in range(n)) / (2 * n)
    return velocity, force, H, kinetic


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_readable_and_fused_terms_equal_the_per_token_formulas(seed):
    """Mean-field normalisation ``z_i = (1/N) Σ_j e^{s_ij}``: the readable functions, the
    fused field and energies, and the model's field all equal the loops, with ``V = B A``
    not symmetric (only ``B`` and ``A`` enter)."""
    X, Y, A, V, B = non_commuting(seed)
    velocity, force, H, kinetic = per_token(X, Y, A, B)
    np.testing.assert_allclose(inertial_velocity(X, Y, A, B), velocity, rtol=1e-12)
    np.testing.assert_allclose(inertial_force(X, Y, A, B), force, rtol=1e-11, atol=1e-13)
    assert inertial_hamiltonian(X, Y, A, B) == pytest.approx(H, rel=1e-12)
    assert inertial_kinetic(X, Y, A, B) == pytest.approx(0.5 * kinetic, rel=1e-12)
    assert inertial_dissipation(X, Y, A, B) == pytest.approx(kinetic, rel=1e-12)
    v, F = inertial_parts(X, Y, A, B, Workspace())
    np.testing.assert_allclose(v, velocity, rtol=1e-12)
    np.testing.assert_allclose(F, force, rtol=1e-11, atol=1e-13)
    measures = inertial_measures(X, Y, A, B)
    assert measures == pytest.approx((H, 0.5 * kinetic, kinetic, np.linalg.norm(velocity)),
                                     rel=1e-12)
    prob = InertialProblem(A=A, V=V, damping=Damping("constant", 0.7))
    np.testing.assert_allclose(prob.B, B, rtol=1e-12, atol=1e-14)
    got = prob.field(0.0, np.stack([X, Y]), Workspace())
    np.testing.assert_allclose(got[0], velocity, rtol=1e-12)
    np.testing.assert_allclose(got[1], force - 0.7 * Y, rtol=1e-11, atol=1e-13)
    dX, dY = models.get("softmax_inertial").readable["field"](prob, 0.0, X, Y)
    np.testing.assert_allclose(dY, force - 0.7 * Y, rtol=1e-11, atol=1e-13)


def test_large_scores_stay_finite_and_agree():
    """Scores far past e^709: ``log z``, velocities and ratios stay finite; the fused and
    readable forces agree where representable and are the same ±inf beyond."""
    X, Y, A, V, B = non_commuting(4, n=5)
    for scale in (1.0, 10.0, 20.0, 200.0):
        Xs = scale * X
        logz = log_mean_partition(Xs, A)
        grown = logz.max() < 600  # momenta grow like z_i, while representable
        Ys = Y * np.exp(logz)[:, None] if grown else Y
        with np.errstate(all="raise", under="ignore"):
            v, F = inertial_parts(Xs, Ys, A, B)
            measures = inertial_measures(Xs, Ys, A, B)
        with np.errstate(over="ignore", under="ignore"):
            F_ref = inertial_force(Xs, Ys, A, B)
        if grown:
            np.testing.assert_allclose(v, Y @ B, rtol=1e-10)  # B y_i / z_i
        assert np.all(np.isfinite(v)) and np.isfinite(measures[3])
        assert not np.any(np.isnan(F))
        finite = np.isfinite(F_ref)
        np.testing.assert_array_equal(np.isfinite(F), finite)
        np.testing.assert_allclose(F[finite], F_ref[finite], rtol=1e-9)
    assert not np.all(finite)


def _dissipation_rate(X, Y, A, B, alpha):
    """``α Σ_i y_iᵀ B y_i / z_i`` from plain exponentials (moderate scores)."""
    z = np.exp(X @ A @ X.T).mean(axis=1)
    return alpha * float(np.sum(np.einsum("ij,jk,ik->i", Y, B, Y) / z))


@pytest.mark.parametrize("damping", [Damping("constant", 0.7),
                                     Damping("nesterov", 0.1, 3.0, 1.0)],
                         ids=["constant", "nesterov"])
def test_energy_law_against_quadrature(damping):
    """``H(T) − H(0) + ∫_0^T α Σ_i y_iᵀ B y_i / z_i dt = 0``: along a tight ``solve_ivp``
    trajectory of the readable field (quadrature on 401 points) and along the engine's
    fused RK4 steps (Simpson on the steps), with ``V`` not symmetric."""
    X0, Y0, A, V, B = non_commuting(5, n=6, d=2, scale=0.6)
    prob = InertialProblem(A=A, V=V, damping=damping)
    field = models.get("softmax_inertial").readable["field"]
    n, d = X0.shape
    T = 1.0

    def rhs(t, w):
        dX, dY = field(prob, t, w[:n * d].reshape(n, d), w[n * d:].reshape(n, d))
        return np.concatenate([dX.ravel(), dY.ravel()])

    sol = solve_ivp(rhs, (0, T), np.concatenate([X0.ravel(), Y0.ravel()]), method="DOP853",
                    rtol=1e-12, atol=1e-13, dense_output=True)
    ts = np.linspace(0, T, 401)
    states = [(w[:n * d].reshape(n, d), w[n * d:].reshape(n, d)) for w in sol.sol(ts).T]
    H = np.array([inertial_hamiltonian(X, Y, A, B) for X, Y in states])
    D = np.array([_dissipation_rate(X, Y, A, B, float(damping.rate(t)))
                  for t, (X, Y) in zip(ts, states, strict=True)])
    scale = abs(H[0])
    res_simpson = abs(H[-1] - H[0] + simpson(D, x=ts)) / scale
    res_trapezoid = abs(H[-1] - H[0] + trapezoid(D, ts)) / scale
    # the engine's fused field, RK4 steps of h, the law by Simpson's rule on the steps
    residuals = []
    for h in (0.01, 0.005):
        stepper, st = RK4(prob), Simulation(Settings(model="softmax_inertial", n_tokens=n,
                                                     dim=d), features=X0, momenta=Y0).state
        carry = stepper.start(st)
        Hs, Ds = [inertial_hamiltonian(st.X, st.P, A, B)], [D[0]]
        for _ in range(int(round(T / h))):
            st, carry = stepper.step(st, carry, h)
            Hs.append(inertial_hamiltonian(st.X, st.P, A, B))
            Ds.append(_dissipation_rate(st.X, st.P, A, B, float(damping.rate(st.t))))
        residuals.append(abs(Hs[-1] - Hs[0] + simpson(Ds, dx=h)) / scale)
    print(f"{damping.kind}: H {H[0]:.6g} -> {H[-1]:.6g}; relative energy-law residual "
          f"solve_ivp + Simpson {res_simpson:.2e}, + trapezoid {res_trapezoid:.2e}; "
          f"RK4 h = 0.01, 0.005: {residuals[0]:.2e}, {residuals[1]:.2e}")
    assert H[-1] < H[0] - 0.05 * scale  # the law is tested on a real loss of energy
    assert res_simpson < 1e-9 and res_trapezoid < 1e-4
    assert residuals[1] < 1e-8 and residuals[0] / residuals[1] > 12


def _overdamped_error(alpha, X0, A, V, tau):
    """``max |x_i(ατ) − x̄_i(τ)| / max |x̄(τ)|``: the inertial model from ``y(0) = 0`` at
    damping ``α`` read on the clock ``τ = t/α`` against the first-order flow ``x̄``.

    On that clock, with ``p = α y``: ``dx/dτ = B p / z``, ``dp/dτ = α² (F(x, p/α) − p)``
    (stiff: Radau)."""
    n, d = X0.shape
    B = value_kernel_ratio(A, V)

    def inertial(t, w):
        X, P = w[:n * d].reshape(n, d), w[n * d:].reshape(n, d)
        dX = inertial_velocity(X, P, A, B)
        dP = alpha ** 2 * (inertial_force(X, P / alpha, A, B) - P)
        return np.concatenate([dX.ravel(), dP.ravel()])

    def first_order(t, x):
        return softmax_velocity(x.reshape(n, d), A, V).ravel()

    ref = solve_ivp(first_order, (0, tau), X0.ravel(), method="DOP853", rtol=1e-13,
                    atol=1e-14).y[:, -1]
    got = solve_ivp(inertial, (0, tau), np.concatenate([X0.ravel(), np.zeros(n * d)]),
                    method="Radau", rtol=1e-10, atol=1e-12).y[:n * d, -1]
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def test_overdamped_limit_is_the_first_order_flow_with_error_one_over_alpha_squared():
    """From ``y(0) = 0``, on the clock ``τ = t/α``, the positions approach the first-order
    softmax flow with error ``O(1/α²)``: ratio ≈ 100 per tenfold α (τ = 0.5, N = 8,
    d = 2, A = diag(1, 0.5), V = diag(1, 2), S(0) = 0.5 I)."""
    A, V = np.diag([1.0, 0.5]), np.diag([1.0, 2.0])
    X0 = initial_cloud("gaussian", 8, 2, 0.5, np.random.default_rng(0))
    errors = [_overdamped_error(alpha, X0, A, V, 0.5) for alpha in (10.0, 100.0, 1000.0)]
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    print(f"overdamped limit, α = 10, 100, 1000 at τ = 0.5: relative errors "
          f"{errors[0]:.2e}, {errors[1]:.2e}, {errors[2]:.2e}; ratios {ratios[0]:.1f}, "
          f"{ratios[1]:.1f}")
    assert errors[0] < 0.1
    assert 60 < ratios[0] < 140 and 80 < ratios[1] < 125


def lab_presets():
    """The lab's presets that run the attention models (the base case, momentum on a
    quadratic, runs none)."""
    return [p for p in json.loads(PRESETS.read_text(encoding="utf-8"))
            if p["settings"]["model"] != "momentum_quadratic"]


@pytest.mark.parametrize("preset", lab_presets(), ids=lambda p: p["name"])
def test_every_lab_preset_runs_the_inertial_model_to_the_horizon(preset):
    """Each preset of the inertial lab, run as the lab runs the softmax models (300 steps
    of dt, norm limit 1e6): softmax_inertial reaches the horizon, close to a tight
    reference, or (V ⪯ 0) is refused with a message saying what to change."""
    s = Settings(**{**preset["settings"], "model": "softmax_inertial", "norm_limit": 1e6})
    if any(float(v) <= 0 for v in s.value_diag.split(",")):
        with pytest.raises(ValueError, match=r"softmax_inertial needs B = V A⁻¹ positive "
                           r"definite .*: give value_diag > 0 \(got value_diag = '-1, 0'\)"):
            Simulation(s)
        return
    sim = Simulation(s)
    prob, start = sim.problem, sim.state
    sim.advance(LAB_STEPS)
    T = LAB_STEPS * s.dt
    assert sim.status == "running", sim.message
    assert sim.t == pytest.approx(T)
    rhs, y0, unpack = models.get("softmax_inertial").readable["reference"](prob, start)
    ref = unpack(solve_ivp(rhs, (0, T), y0, method="DOP853", rtol=1e-11,
                           atol=1e-12).y[:, -1])
    error = np.abs(sim.state.X - ref["X"]).max() / np.abs(ref["X"]).max()
    lam = sim.frame().diagnostics["second_moment_max"]
    print(f"{preset['name']}: t = {sim.t:.2f}, λ_max(S) = {lam:.3g}, relative error of X "
          f"against solve_ivp {error:.1e}")
    assert error < 1e-6


def test_stop_test_watches_velocities_not_the_momenta():
    """``A = V = I``, ``S(0) = 0.5 I``, ``α = 0``, N = 16, d = 2: the momenta grow like
    ``z_i`` (‖Y‖ passes 1e3 before t = 2) while the velocities ``B y_i / z_i`` stay
    O(1); a norm limit of 1e3 does not stop the run."""
    s = Settings(model="softmax_inertial", n_tokens=16, dim=2, alpha=0.0,
                 second_moment=0.5, norm_limit=1e3)
    sim = Simulation(s)
    sim.advance(250)
    d = sim.frame().diagnostics
    prob, st = sim.problem, sim.state
    speed = np.linalg.norm(inertial_velocity(st.X, st.P, prob.A, prob.B))
    assert sim.status == "running", sim.message
    assert d["momentum_norm"] > 1e3 and speed < 10.0
    # velocities above the limit (features below it) stop the run, named
    fast = Simulation(s.copy(norm_limit=50.0), momenta=np.full((16, 2), 100.0))
    fast.advance(1)
    assert fast.status == "diverged" and "velocity norm ‖B y_i / z_i‖" in fast.message


def test_a_state_about_to_leave_the_float_range_stops_with_an_honest_message():
    """Beyond the largest score the run can carry (e^650), the run stops saying it is a
    limit of floating point, with finite diagnostics."""
    s = Settings(model="softmax_inertial", n_tokens=4, dim=2, second_moment=0.5, alpha=1.0)
    X = np.array([[18.0, 0.0], [17.0, 1.0], [-17.5, 0.5], [18.2, -0.3]])
    sim = Simulation(s, features=X)
    frame = sim.step(2000)
    assert sim.status == "diverged"
    assert "largest score" in sim.message and "not a blow-up" in sim.message
    assert all(np.isfinite(v) for v in frame.diagnostics.values())


@pytest.mark.parametrize("value_diag, match", [
    ("-1", r"give value_diag > 0 \(got value_diag = '-1'\)"),
    ("1, 0", r"give value_diag > 0 \(got value_diag = '1, 0'\)"),
])
def test_invalid_value_matrix_says_what_to_change(value_diag, match):
    with pytest.raises(ValueError, match=r"softmax_inertial needs B = V A⁻¹ positive definite"):
        Simulation(Settings(model="softmax_inertial", dim=2, value_diag=value_diag))
    with pytest.raises(ValueError, match=match):
        Simulation(Settings(model="softmax_inertial", dim=2, value_diag=value_diag))
