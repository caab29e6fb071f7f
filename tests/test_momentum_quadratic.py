"""Momentum on a quadratic (issue #29; MODEL.md §14, paper 002 §3): the base case of the
inertial lab, ``ẍ + α(t) ẋ + ∇f(x) = 0`` with ``f = ½ xᵀ A x`` per token, against its
exact answers.

Stated and tested ("Done when"): run through ``simulate`` at ``dt = 0.001``, the model
matches the closed forms to ≤ 1e-6 over ``t ≤ 10`` at every frame — the Bessel solution
for Nesterov ``r = 3`` and ``r = 5`` from ``t0 = 0`` and the damped oscillator for
constant ``α`` (under-, critically and over-damped at once). Measured: ~1e-13 (RK4, order
4, from the singular start too). Also: the Su–Boyd–Candès bound at every frame, the
gradient flow's ``e^{−a_k t}``, the measured order, the energy law as a residual, and the
finite first step at ``t0 = 0``.
"""

import math

import numpy as np
import pytest
from helpers import fitted_order
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import gamma, jv

from dynamics import Settings, Simulation, models, simulate
from dynamics.cli import main
from dynamics.diagnostics import PART_TWO
from dynamics.inertial import Damping
from dynamics.inertial.momentum import critical_damping, gradient_run, run_momentum_experiment
from dynamics.inertial.quadratic import (
    bessel_profile,
    bessel_solution,
    closed_form,
    gradient_flow_solution,
    oscillator_solution,
    rate_bound,
)
from dynamics.models.momentum_quadratic import EXTRA_DIAGNOSTICS, field, gradient_flow
from dynamics.workspace import Workspace

MODEL = "momentum_quadratic"
#: The tokens of the issue's example (N = 3, d = 2).
X0 = np.array([[1.0, -0.5], [0.3, 2.0], [-1.5, 0.8]])
#: ``kernel_diag = "2, 0.5"``.
A = np.diag([2.0, 0.5])
#: "Done when": the largest error allowed at dt = 0.001 over t ≤ 10.
DONE_TOLERANCE = 1e-6


def nesterov(r=3.0, t0=0.0, c=0.0, **more):
    return Settings(model=MODEL, kernel_diag="2, 0.5", dim=2, n_tokens=3, damping="nesterov",
                    nesterov_r=r, nesterov_t0=t0, alpha=c, **more)


def heavy_ball(c, kernel_diag="2, 0.5", d=2, **more):
    return Settings(model=MODEL, kernel_diag=kernel_diag, dim=d, n_tokens=3,
                    damping="constant", alpha=c, **more)


# -- the model in the registry, through Settings, Simulation, simulate and the CLI ----------
def test_the_issue_example_runs_from_nesterov_t0_zero():
    sim = Simulation(Settings(model="momentum_quadratic", kernel_diag="2, 0.5", dim=2,
                              n_tokens=3, damping="nesterov", nesterov_r=3, nesterov_t0=0,
                              alpha=0), features=X0)
    start = sim.frame().diagnostics
    assert tuple(start) == PART_TWO + EXTRA_DIAGNOSTICS
    assert start["damping"] == math.inf and start["dissipation_rate"] == 0.0
    assert start["suboptimality"] == pytest.approx(0.5 * np.sum((X0 @ A) * X0), rel=1e-15)
    frame = sim.step(100)
    assert sim.status == "running" and frame.t == pytest.approx(1.0)
    values = dict(frame.diagnostics)
    assert all(math.isfinite(v) for v in values.values())
    assert values["hamiltonian"] < start["hamiltonian"] and values["dissipated"] > 0
    spec = models.get(MODEL)
    assert spec.part == 2 and MODEL in models.names(part=2)
    assert MODEL in Settings.param.model.objects
    assert "value_diag" not in spec.reads() and "nesterov_t0" in spec.continue_settings


def test_the_first_step_from_t0_zero_is_finite_and_starts_as_section_14_says():
    """At t0 = 0, α = r/t is infinite at t = 0 but ẍ(0) = −∇f(x0)/(1 + r): the field
    there is that limit, and a small step moves the momenta by h ẍ(0)."""
    s = nesterov(r=3.0, dt=1e-4)
    sim = Simulation(s, features=X0)
    _, dY = field(sim.problem, 0.0, X0, np.zeros_like(X0))
    np.testing.assert_allclose(dY, -(X0 @ A) / 4.0, rtol=1e-15)
    sim.advance(1)
    np.testing.assert_allclose(sim.state.P / 1e-4, -(X0 @ A) / 4.0, rtol=1e-7)
    np.testing.assert_allclose(sim.state.X, X0 - 0.5e-8 * (X0 @ A) / 4.0, rtol=1e-12)


def test_simulate_and_the_command_line_run_it(tmp_path, capsys):
    run = simulate(nesterov(dt=0.01), t_end=2.0, every=20, arrays={"features": X0})
    assert run.status == "running" or run.message == ""
    assert {"suboptimality", "energy_residual", "dissipated"} <= set(run.diagnostics)
    out = tmp_path / "run.csv"
    assert main(["run", "--model", MODEL, "--damping", "nesterov", "--nesterov-t0", "0",
                 "--alpha", "0", "--kernel-diag", "1, 0.01", "--dim", "2", "--n-tokens", "4",
                 "--dt", "0.01", "--t-end", "1", "--every", "10", "--out", str(out)]) == 0
    text = out.read_text()
    assert "suboptimality" in text.splitlines()[0] and len(text.splitlines()) == 12


def test_t0_zero_is_refused_by_the_other_part_two_models_and_with_moving_momenta():
    for model in models.names(part=2):
        if model == MODEL:
            continue
        with pytest.raises(ValueError, match="nesterov_t0 must be > 0"):
            Simulation(Settings(model=model, damping="nesterov", nesterov_t0=0.0))
        Simulation(Settings(model=model, damping="constant", nesterov_t0=0.0))  # not read
    with pytest.raises(ValueError, match="nesterov_t0 must be > 0"):
        Simulation(nesterov(), features=X0, momenta=np.full_like(X0, 0.1))
    moving = Simulation(nesterov(t0=1.0), features=X0, momenta=np.full_like(X0, 0.1))
    moving.settings.nesterov_t0 = 0.0  # at t = 0 with momenta: refused as well
    with pytest.raises(ValueError, match="nesterov_t0 must be > 0"):
        moving.advance(1)
    with pytest.raises(ValueError, match="Damping|t0 >= 0"):
        Damping("nesterov", 0.0, 3.0, -1.0)


def test_matrices_it_cannot_take_are_refused():
    with pytest.raises(ValueError, match="positive definite"):
        Simulation(heavy_ball(1.0, kernel_diag="1, -1"))
    with pytest.raises(ValueError, match="no value matrix"):
        Simulation(heavy_ball(1.0), features=X0, value=np.eye(2))
    with pytest.raises(ValueError, match="symmetric"):
        Simulation(heavy_ball(1.0), features=X0, kernel=np.array([[1.0, 0.5], [0.0, 1.0]]))
    # a value diagonal it does not read is not parsed
    Simulation(heavy_ball(1.0, value_diag="1, 2, 3, 4, 5"))


def test_the_fused_field_is_the_readable_field_also_at_the_singular_start():
    rng = np.random.default_rng(1)
    s = Settings(model=MODEL, kernel_diag="3, 1, 0.2", dim=3, n_tokens=5,
                 matrix_draw="random", damping="nesterov", nesterov_t0=0.0, alpha=0.4)
    prob = Simulation(s).problem
    X, Y = rng.standard_normal((5, 3)), 0.3 * rng.standard_normal((5, 3))
    for t, y in ((0.7, Y), (0.0, np.zeros_like(Y))):
        expected = field(prob, t, X, y)
        got = prob.field(t, np.stack([X, y]), Workspace())
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(gradient_flow(prob, X), -X @ prob.A, rtol=1e-15)


# -- the closed forms ("Done when") ------------------------------------------------------------
def _worst_error(settings, exact, t_end=10.0, every=100):
    run = simulate(settings, t_end=t_end, every=every, arrays={"features": X0})
    assert run.status == "running" or run.diverged_at is None
    ref = exact(run.times)
    assert run.times[-1] == pytest.approx(t_end)
    return float(np.max(np.abs(run.features - ref))), run


@pytest.mark.parametrize("r", [3.0, 5.0])
def test_done_when_nesterov_from_t0_zero_matches_the_bessel_solution(r):
    """dt = 0.001, every frame (every 0.1) up to t = 10: ≤ 1e-6 (measured ~1e-13)."""
    error, run = _worst_error(nesterov(r=r, dt=0.001),
                              lambda t: bessel_solution(A, X0, t, r))
    print(f"r = {r:g}: largest error over t ≤ 10 at dt = 0.001: {error:.2e}")
    assert error <= DONE_TOLERANCE
    assert error <= 1e-11  # what RK4 gives here
    # and the exact profile is the Bessel function of MODEL.md §14
    nu, z = (r - 1) / 2, math.sqrt(2.0) * run.times[1:]
    np.testing.assert_allclose(bessel_profile(2.0, run.times[1:], r),
                               gamma(nu + 1) * (2 / z) ** nu * jv(nu, z), rtol=1e-12,
                               atol=1e-14)


def test_done_when_the_heavy_ball_matches_the_damped_oscillator():
    """Constant α = 2 on a = 4, 1, 0.25: under-damped (ω² = 3), critical and over-damped
    (κ² = 0.75) in one run; dt = 0.001, every frame up to t = 10: ≤ 1e-6."""
    X3 = np.array([[1.0, -0.5, 2.0], [0.3, 2.0, -1.0], [-1.5, 0.8, 0.5]])
    s = heavy_ball(2.0, kernel_diag="4, 1, 0.25", d=3, dt=0.001)
    run = simulate(s, t_end=10.0, every=100, arrays={"features": X3})
    ref = oscillator_solution(np.diag([4.0, 1.0, 0.25]), X3, run.times, 2.0)
    error = float(np.max(np.abs(run.features - ref)))
    print(f"heavy ball: largest error over t ≤ 10 at dt = 0.001: {error:.2e}")
    assert error <= DONE_TOLERANCE and error <= 1e-11


@pytest.mark.parametrize("c, a", [(0.5, 2.0), (3.0, 0.5), (2.0, 1.0), (0.0, 1.0)])
def test_the_oscillator_formula_is_the_ode_solution(c, a):
    """The closed form itself, against solve_ivp, in each regime (and undamped)."""
    from scipy.integrate import solve_ivp

    t = np.linspace(0, 10, 51)
    sol = solve_ivp(lambda s, y: [y[1], -c * y[1] - a * y[0]], (0, 10), [1.0, 0.0],
                    t_eval=t, method="DOP853", rtol=1e-12, atol=1e-14)
    got = oscillator_solution(np.array([[a]]), np.array([[1.0]]), t, c)[:, 0, 0]
    np.testing.assert_allclose(got, sol.y[0], atol=1e-11)


def test_a_rotated_bowl_matches_the_closed_form_in_its_eigenbasis():
    s = Settings(model=MODEL, kernel_diag="2, 0.5, 1", dim=3, n_tokens=4, seed=2,
                 matrix_draw="random", damping="nesterov", nesterov_t0=0.0, alpha=0.0,
                 dt=0.01)
    run = simulate(s, t_end=5.0, every=50)
    prob = Simulation(s).problem
    assert np.abs(prob.A - np.diag(np.diag(prob.A))).max() > 0.1  # not diagonal
    exact = closed_form(prob.A, run.features[0], run.times, prob.damping)
    assert np.max(np.abs(run.features - exact)) < 1e-8


def test_the_gradient_flow_is_e_to_the_minus_a_t():
    """The lab's gradient-flow curve (RK4 on ẋ = −∇f) against x_k(0) e^{−a_k t}."""
    prob = Simulation(heavy_ball(1.0)).problem
    run = gradient_run(prob, X0, 0.01, 1000)
    exact = X0[None] * np.exp(-np.outer(run.t, [2.0, 0.5]))[:, None, :]
    np.testing.assert_allclose(gradient_flow_solution(A, X0, run.t), exact, rtol=1e-13,
                               atol=1e-15)
    assert np.max(np.abs(run.X - exact)) < 1e-9 and run.exact_error < 1e-9
    f = 0.5 * np.einsum("kia,ab,kib->k", exact, A, exact)
    np.testing.assert_allclose(run.suboptimality, f, rtol=1e-8)


# -- the rate -------------------------------------------------------------------------------
@pytest.mark.parametrize("r", [3.0, 5.0])
def test_su_boyd_candes_bound_at_every_frame(r):
    """f − f* ≤ (r − 1)² |x0|² / (2t²) at every frame t > 0 of a run on an
    ill-conditioned bowl (a = 1, 0.01), t0 = 0, c = 0."""
    s = Settings(model=MODEL, kernel_diag="1, 0.01", dim=2, n_tokens=3, damping="nesterov",
                 nesterov_r=r, nesterov_t0=0.0, alpha=0.0, dt=0.02)
    run = simulate(s, t_end=60.0, every=5, arrays={"features": X0})
    t, gap = run.times[1:], run.diagnostics["suboptimality"][1:]
    bound = rate_bound(r, X0, t)
    assert np.all(gap <= bound), (t[gap > bound], gap[gap > bound])
    assert np.max(gap / bound) > 0.05  # not a vacuous bound here


@given(a=st.lists(st.floats(1e-3, 10.0), min_size=1, max_size=4),
       r=st.floats(3.0, 12.0), t=st.floats(1e-3, 1e3))
def test_su_boyd_candes_bound_holds_for_the_exact_solution(a, r, t):
    """The bound, for the Bessel solution, at random curvatures, r ≥ 3 and times."""
    rng = np.random.default_rng(len(a))
    X = rng.standard_normal((2, len(a)))
    Ad = np.diag(a)
    Xt = bessel_solution(Ad, X, [t], r)[0]
    gap = 0.5 * float(np.sum((Xt @ Ad) * Xt))
    assert gap <= rate_bound(r, X, [t])[0] * (1 + 1e-12)


# -- order and energy ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["nesterov_t0_zero", "heavy_ball"])
def test_measured_order_is_four_from_the_singular_start_too(case):
    """Errors at t = 2 against the closed form at dt = 0.1 … 0.0125: fitted order ≥ 3.8;
    the dissipated energy ∫α|ẋ|² (integrated on the same stages) to the same order,
    against H(0) − H(t) of the exact solution."""
    s = nesterov(r=3.0) if case == "nesterov_t0_zero" else heavy_ball(0.7)
    exact = closed_form(A, X0, [2.0], Simulation(s, features=X0).problem.damping)[0]
    errors, energy_errors, steps = [], [], [0.1, 0.05, 0.025, 0.0125]
    for dt in steps:
        sim = Simulation(s.copy(dt=dt), features=X0)
        sim.advance(int(round(2.0 / dt)))
        assert sim.t == pytest.approx(2.0)
        errors.append(float(np.max(np.abs(sim.state.X - exact))))
        energy_errors.append(abs(sim.frame().diagnostics["energy_residual"]))
    order = fitted_order(steps, errors)
    energy_order = fitted_order(steps, energy_errors)
    print(f"{case}: errors {errors}, order {order:.2f}; energy residual order "
          f"{energy_order:.2f}")
    assert order >= 3.8 and energy_order >= 3.5
    assert models.get(MODEL).stepper.order == 4


def test_the_energy_law_as_a_residual_and_h_only_decreasing():
    for s in (nesterov(dt=0.01), heavy_ball(0.3, dt=0.01), nesterov(t0=1.0, c=0.2, dt=0.01)):
        run = simulate(s, t_end=20.0, every=10, arrays={"features": X0})
        d = run.diagnostics
        H = d["hamiltonian"]
        assert np.all(np.diff(H) <= 1e-12) and H[-1] < 0.5 * H[0]
        np.testing.assert_allclose(H - H[0] + d["dissipated"], d["energy_residual"],
                                   atol=1e-14)
        assert np.max(np.abs(d["energy_residual"])) < 1e-7 * H[0]
        np.testing.assert_allclose(d["suboptimality"], H - d["kinetic_energy"], rtol=1e-12,
                                   atol=1e-15)


def test_a_damping_change_mid_run_continues_from_the_state():
    s = nesterov(dt=0.01)
    sim = Simulation(s, features=X0)
    sim.advance(50)
    X, P = sim.state.X, sim.state.P
    s.damping, s.alpha = "constant", 0.8
    assert sim.sync() == "continue" and sim.t == pytest.approx(0.5)
    sim.advance(10)
    fresh = Simulation(s.copy(), features=X, momenta=P)
    fresh.advance(10)
    np.testing.assert_allclose(sim.state.X, fresh.state.X, rtol=1e-14, atol=1e-16)


# -- the lab's experiment ----------------------------------------------------------------------
def test_the_lab_experiment_runs_the_four_flows_and_meets_their_closed_forms():
    r = run_momentum_experiment({"kernel_diag": "1, 0.01", "dim": 2, "n_tokens": 2,
                                 "damping": "nesterov", "nesterov_r": 3.0,
                                 "nesterov_t0": 0.0, "alpha": 2.0, "second_moment": 0.5})
    assert list(r.runs) == ["gradient_flow", "heavy_ball", "critical", "nesterov"]
    assert r.horizon == pytest.approx(100.0) and r.dt == pytest.approx(0.1)
    assert r.runs["critical"].damping.c == pytest.approx(critical_damping(r.a)) == 0.2
    for run in r.runs.values():
        assert run.exact_error is not None and run.exact_error < 1e-5, run.label
        assert np.max(np.abs(run.energy_residual)) < 1e-5
        assert run.t[-1] == pytest.approx(100.0)
    assert r.bound_holds is True
    # Nesterov leads in the middle, the heavy ball tuned to a_min at the end
    assert r.leader(20.0) == "nesterov" and r.leader(100.0) == "critical"
