"""Accuracy on request: compositions of the symmetric steps and ``simulate(rtol=...)``.

Orders are measured against ``solve_ivp`` (DOP853, rtol 1e-12) on each model's readable
equations, as in ``test_orders.py``; ``simulate(rtol)`` is compared with the same kind of
reference in a non-stiff and a stiff (γ/β = 1000) regime.
"""

import math

import numpy as np
import pytest
from helpers import fitted_order
from test_orders import _error

from dynamics import Settings, Simulation, simulate
from dynamics.logits import exp_quadratic, exp_trapezoid, phi1, psi
from dynamics.reference import solve_reference
from dynamics.steppers import RK4, EtdVerlet, Heun, Strang, TrackedEtdVerlet, Verlet
from dynamics.steppers.composition import SCHEMES, composable, compose

T_END = 1.0
#: Symmetric steps (composable): settings of a small, moving, bounded run over t = 1,
#: λ = 0.3 (canonical, attention) so that λ|c h| stays small.
SYMMETRIC = {
    "canonical": {"init_momentum": "random", "init_attention": "random", "gamma": 0.3},
    "reduced": {"init_momentum": "random"},
    "attention": {"path": "rotation", "gamma": 0.3, "init_attention": "random"},
}


def _composed_run(settings, scheme, dt):
    sim = Simulation(settings.copy(dt=dt))
    sim.use_stepper(compose(type(sim.stepper), scheme)(sim.problem))
    sim.advance(int(round(T_END / dt)))
    assert sim.status == "running", sim.message
    assert sim.t == pytest.approx(T_END, abs=1e-12)
    return sim.state


@pytest.mark.parametrize("scheme", ["suzuki4", "yoshida4"])
@pytest.mark.parametrize("model", list(SYMMETRIC))
def test_composition_raises_the_measured_order_to_four(model, scheme):
    base = Settings(model=model, n_tokens=5, dim=3, seed=3, **SYMMETRIC[model])
    ref, unpack = solve_reference(base, T_END, rtol=1e-12, atol=1e-14)
    assert ref.success
    exact = unpack(ref.y[:, -1])
    # the triple jump's sub-steps (1.35 h, −1.70 h) leave the asymptotic range later
    steps = [2.0**-k for k in ((2, 3, 4, 5) if scheme == "suzuki4" else (4, 5, 6))]
    sim = Simulation(base)
    assert composable(type(sim.stepper), sim.problem, steps[0], SCHEMES[scheme][1]) is None
    errors = [_error(_composed_run(base, scheme, dt), exact) for dt in steps]
    measured = fitted_order(steps, errors)
    print(f"{model} {scheme}: errors {errors}, measured order {measured:.2f}")
    assert measured == pytest.approx(4.0, abs=0.4)
    # the same sub-steps uncomposed (dt = 1/32) are far less accurate (not the attention
    # model's: its logit step is exact for scores cubic in time, fourth order in its state)
    if model != "attention":
        assert errors[-1] < 0.1 * _error(_base_state(base, steps[-1]), exact)


def _base_state(settings, dt):
    sim = Simulation(settings.copy(dt=dt))
    sim.advance(int(round(T_END / dt)))
    return sim.state


@pytest.mark.parametrize("model", ["cotangent_lift", "transformer"])
def test_composing_a_non_symmetric_step_gains_one_order_only(model):
    """Why composition needs a symmetric step: Strang with Heun inside, and Heun, composed
    with Suzuki's coefficients reach order 3 (from Σc³ = 0), not 4."""
    values = {"init_momentum": "random", "init_attention": "random", "gamma": 0.3}
    base = Settings(model=model, n_tokens=5, dim=3, seed=3,
                    **(values if model == "cotangent_lift" else {}))
    ref, unpack = solve_reference(base, T_END, rtol=1e-12, atol=1e-14)
    exact = unpack(ref.y[:, -1])
    steps = [2.0**-k for k in (3, 4, 5, 6)]
    errors = [_error(_composed_run(base, "suzuki4", dt), exact) for dt in steps]
    measured = fitted_order(steps, errors)
    print(f"{model} suzuki4: errors {errors}, measured order {measured:.2f}")
    assert measured == pytest.approx(3.0, abs=0.35)


def test_sixth_order_composition_of_verlet():
    base = Settings(model="reduced", n_tokens=5, dim=3, seed=3, **SYMMETRIC["reduced"])
    ref, unpack = solve_reference(base, T_END, rtol=1e-13, atol=1e-15)
    exact = unpack(ref.y[:, -1])
    steps = [2.0**-k for k in (2, 3, 4)]
    errors = [_error(_composed_run(base, "yoshida6", dt), exact) for dt in steps]
    measured = fitted_order(steps, errors)
    print(f"reduced yoshida6: errors {errors}, measured order {measured:.2f}")
    assert measured == pytest.approx(6.0, abs=0.6)


@pytest.mark.parametrize("model, values, stepper, why", [
    ("value_matching", {"kappa": 0.5}, EtdVerlet, "not symmetric"),
    ("cotangent_lift", {}, Strang, "not a symmetric step"),
    ("transformer", {}, Heun, "not a symmetric step"),
    ("softmax_first_order", {}, RK4, "not a symmetric step"),
    ("canonical", {"gamma": 1000.0}, TrackedEtdVerlet, "stiff relaxation"),
    ("attention", {"path": "switch"}, None, "jump"),
])
def test_composition_refused_where_the_step_is_not_symmetric(model, values, stepper, why):
    sim = Simulation(Settings(model=model, n_tokens=4, dim=3, **values))
    if stepper is not None:
        assert isinstance(sim.stepper, stepper)
    reason = composable(type(sim.stepper), sim.problem, 0.01, SCHEMES["suzuki4"][1])
    assert reason is not None and why in reason


def test_symmetric_steps_are_accepted_and_verlet_at_any_step():
    sim = Simulation(Settings(model="reduced", n_tokens=4, dim=3))
    assert isinstance(sim.stepper, Verlet)
    assert composable(Verlet, sim.problem, 10.0, SCHEMES["yoshida4"][1]) is None
    with pytest.raises(ValueError, match="order 2"):
        compose(RK4)


def test_backward_step_coefficients_are_accurate():
    """A composition's backward sub-steps have λh < 0: the logit coefficients and the
    bound's weights must use their exact forms there (not the series for small λh ≥ 0)."""
    for x in (-0.3, -0.05, -1e-3, -3e-5):
        assert phi1(x) == pytest.approx(-math.expm1(-x) / x, rel=1e-13)
        assert psi(x) == pytest.approx(1.0 + math.expm1(-x) / x, rel=1e-9)
        w0, w1 = exp_trapezoid(x, 1.0)  # ∫₀¹ e^{−x(1−s)} (a + b s) ds
        assert w0 + w1 == pytest.approx(-math.expm1(-x) / x, rel=1e-12)
        assert sum(exp_quadratic(x, 1.0)) == pytest.approx(-math.expm1(-x) / x, rel=1e-12)


# -- simulate(rtol=...) ---------------------------------------------------------------
REGIMES = {"non-stiff": ({"gamma": 1.0, "beta": 1.0}, "DOP853", 1e-12),
           "stiff": ({"gamma": 1000.0, "beta": 1.0}, "Radau", 1e-11)}


def _reference_X(settings, method, rtol, t_end):
    sol, unpack = solve_reference(settings, t_end, method=method, rtol=rtol, atol=1e-12)
    assert sol.success
    return unpack(sol.y[:, -1])["X"]


@pytest.mark.parametrize("regime", [
    "non-stiff", pytest.param("stiff", marks=pytest.mark.slow)])  # stiff: Radau reference ~15 s
def test_simulate_rtol_reaches_the_accuracy_asked(regime):
    values, method, ref_rtol = REGIMES[regime]
    s = Settings(model="canonical", n_tokens=8, dim=4, **values)
    X_ref = _reference_X(s, method, ref_rtol, 2.0)
    errors = {}
    for rtol in (1e-3, 1e-4, 1e-5):
        run = simulate(s, 2.0, every=10**6, rtol=rtol)
        assert run.status == "running" and run.times[-1] == 2.0
        errors[rtol] = float(np.max(np.abs(run.features[-1] - X_ref)))
        print(regime, rtol, errors[rtol], run.steps)
        assert errors[rtol] <= 10.0 * rtol
    assert errors[1e-5] < errors[1e-4] < errors[1e-3]  # a tighter rtol, a smaller error
    assert errors[1e-5] < errors[1e-3] / 3.0


def test_simulate_rtol_records_frames_at_uneven_times_up_to_t_end():
    s = Settings(model="canonical", n_tokens=4, dim=3)
    run = simulate(s, 0.5, every=3, rtol=1e-4)
    assert run.times[0] == 0.0 and run.times[-1] == 0.5
    assert np.all(np.diff(run.times) > 0)
    assert run.status == "running"
    n = run.steps["accepted"]
    assert len(run.times) == 1 + math.ceil(n / 3)
    assert abs(run.diagnostics["energy_residual"][-1]) < 1e-3  # H(t) − H(0) + ∫D stays small


def test_simulate_without_rtol_is_unchanged():
    s = Settings(model="canonical", n_tokens=4, dim=3, dt=0.05)
    run = simulate(s, 0.5, every=5)
    sim = Simulation(s)
    sim.advance(10)
    assert np.array_equal(run.features[-1], sim.state.X)
    assert np.allclose(run.times, [0.0, 0.25, 0.5], rtol=0, atol=1e-14)


@pytest.mark.parametrize("model", ["reduced", "transformer", "cotangent_lift",
                                   "value_matching", "softmax_first_order", "attention"])
def test_simulate_rtol_runs_every_kind_of_step(model):
    s = Settings(model=model, n_tokens=4, dim=3)
    run = simulate(s, 0.3, every=100, rtol=1e-5)
    assert run.status == "running" and run.times[-1] == 0.3
    fixed = simulate(s.copy(dt=1e-3), 0.3, every=300)
    assert np.max(np.abs(run.features[-1] - fixed.features[-1])) < 1e-4


@pytest.mark.parametrize("bad", [0.0, -1e-3, 2.0, float("nan"), "x"])
def test_bad_rtol_is_refused(bad):
    with pytest.raises(ValueError, match="rtol"):
        simulate(Settings(model="canonical"), 1.0, rtol=bad)
    with pytest.raises(ValueError, match="atol"):
        simulate(Settings(model="canonical"), 1.0, rtol=1e-3, atol=bad)


def test_simulate_rtol_stops_a_diverging_run_with_the_engine_message():
    s = Settings(model="canonical", n_tokens=6, dim=3, seed=5, confinement=0.0, beta=20.0,
                 norm_limit=20.0, init_momentum="random", dt=0.02)
    fixed = simulate(s, 6.0, every=10)
    assert fixed.status == "diverged", "the test needs a diverging run"
    run = simulate(s, 6.0, every=10, rtol=1e-5)
    assert run.status == "diverged" and run.diverged_at is not None
    assert "feature norm" in run.message and "exceeds 20" in run.message
    assert run.diverged_at == pytest.approx(fixed.diverged_at, abs=0.05)


def test_simulate_rtol_steps_onto_a_jump_of_the_path():
    """The switch path jumps at ``switch_time``: a step ends there (and the jump's work is
    added), whatever size the controller wanted."""
    s = Settings(model="attention", path="switch", n_tokens=4, dim=3, switch_time=1.3)
    run = simulate(s, 3.0, every=1, rtol=1e-6)
    assert run.status == "running" and 1.3 in run.times
    fixed = simulate(s.copy(dt=1e-3), 3.0, every=3000)
    assert np.max(np.abs(run.attention[-1] - fixed.attention[-1])) < 1e-6
    assert run.diagnostics["work"][-1] == pytest.approx(fixed.diagnostics["work"][-1], abs=1e-6)


def test_simulate_rtol_shortens_a_step_the_scheme_refuses():
    """Tokens on the sphere, unnormalised kernel at β = 8 (speeds up to ~e^β): a step that
    would turn a token by more than MAX_TURN raises TooStiff. Under rtol that is the
    controller's step, not the user's dt: it is tried again shorter (it used to stop the
    run, telling the user to lower dt), and the run agrees with a fine reference."""
    s = Settings(model="sphere", sphere_kernel="unnormalised", beta=8.0, n_tokens=32, dim=3,
                 dt=0.01)
    too_long = simulate(s, 0.5, every=50)
    assert too_long.status == "failed" and "turns a token" in too_long.message
    run = simulate(s, 0.5, every=1000, rtol=1e-3)
    assert run.status == "running", run.message
    assert run.times[-1] == 0.5 and run.steps["rejected"] > 0
    # reference: fixed steps of 2e-4 and 1e-4, Richardson-extrapolated (Heun, order 2)
    # (solve_ivp's off-sphere stages overflow e^{β x_iᵀ M x_j} here)
    X1, X2 = (simulate(s.copy(dt=h), 0.5, every=10_000).features[-1] for h in (2e-4, 1e-4))
    error = np.max(np.abs(run.features[-1] - (X2 + (X2 - X1) / 3.0)))
    assert error < 1e-2, error  # measured 2.3e-3 (a global error, at rtol 1e-3)


def test_rtol_with_stochastic_logits_is_refused():
    with pytest.raises(ValueError, match="logit_noise"):
        simulate(Settings(model="canonical", logit_noise=0.3), 1.0, rtol=1e-4)


def test_command_line_rtol(capsys):
    from dynamics.cli import main

    assert main(["run", "--model", "canonical", "--t-end", "0.5", "--rtol", "1e-5",
                 "--summary"]) == 0
    assert '"t_final": 0.5' in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--model", "canonical", "--t-end", "0.5", "--rtol", "0"])
    assert exit_.value.code == 2
    assert "rtol must be in" in capsys.readouterr().err


# -- the explicit branch: DOP853 on the whole system (non-stiff canonical runs) ---------
def _canonical_state(seed, **values):
    """A canonical problem and a state off equilibrium (random momenta and logits, and a
    random bound)."""
    s = Settings(model="canonical", n_tokens=5, dim=3, seed=seed, init_momentum="random",
                 init_attention="random", **values)
    sim = Simulation(s)
    rng = np.random.default_rng(seed)
    return sim.problem, sim.state, rng.uniform(0.0, 2.0, 5)


@pytest.mark.parametrize("values", [
    {}, {"beta": 3.0, "gamma": 0.5}, {"mass": 2.5, "confinement": 1.5},
    {"beta": 0.4, "gamma": 20.0, "mass": 0.7}])
@pytest.mark.parametrize("seed", [1, 7])
def test_fused_field_is_the_readable_one(values, seed):
    """The fused field of the explicit branch against the model's readable equations
    (``coupled_reference``: velocity, force, ``−λ(Z − βS)``, D)."""
    from dynamics import models
    from dynamics.solvers.explicit import canonical_field

    prob, st, _ = _canonical_state(seed, **values)
    rhs, y0, _ = models.get("canonical").readable["reference"](prob, st)
    y0 = y0 + 0.1 * np.random.default_rng(seed).standard_normal(y0.size)  # Z off centre too
    got = canonical_field(prob, 5, 3)(0.0, y0)
    np.testing.assert_allclose(got, rhs(0.0, y0), rtol=1e-12, atol=1e-12)


def test_explicit_branch_has_order_eight():
    """DOP853 on the fused field at fixed steps h (tolerances that accept every step, the
    step capped at h): the error of X, P, Z, ∫D at t = 1 falls like h⁸."""
    from scipy.integrate import DOP853

    from dynamics import models
    from dynamics.solvers.explicit import canonical_field

    prob, st, B = _canonical_state(3, gamma=2.0)
    rhs, y0, _ = models.get("canonical").readable["reference"](prob, st)
    ref = solve_ivp_tight(rhs, y0)
    field = canonical_field(prob, 5, 3)
    steps, errors = [1 / 12, 1 / 16, 1 / 24, 1 / 32], []
    for h in steps:
        solver = DOP853(field, 0.0, y0, 1.0, rtol=1e3, atol=1e3, first_step=h, max_step=h)
        while solver.status == "running":
            solver.step()
        assert solver.t == 1.0
        errors.append(float(np.max(np.abs(solver.y - ref))))
    measured = fitted_order(steps, errors)
    print(f"explicit branch: errors {errors}, measured order {measured:.2f}")
    assert measured == pytest.approx(8.0, abs=0.6)


def solve_ivp_tight(rhs, y0, t_end=1.0):
    from scipy.integrate import solve_ivp

    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-13, atol=1e-15)
    assert sol.success
    return sol.y[:, -1]


@pytest.mark.parametrize("values, explicit", [
    ({"gamma": 1.0}, True), ({"gamma": 20.0, "beta": 0.5}, True),
    ({"gamma": 100.0}, False), ({"gamma": 1000.0}, False)])
def test_simulate_rtol_chooses_its_branch_by_the_relaxation_rate(values, explicit):
    from dynamics.solvers.explicit import EXPLICIT_RATE

    s = Settings(model="canonical", n_tokens=4, dim=3, **values)
    run = simulate(s, 0.05, every=10**6, rtol=1e-4)
    assert (run.steps["method"] == "DOP853") == explicit
    assert (values["gamma"] / values.get("beta", 1.0) <= EXPLICIT_RATE) == explicit


def test_other_models_never_take_the_explicit_branch():
    from dynamics.solvers.explicit import explicit_suits

    for model in ("value_matching", "cotangent_lift", "reduced", "attention"):
        sim = Simulation(Settings(model=model, n_tokens=4, dim=3))
        assert explicit_suits(sim.problem) is not None, model
        run = simulate(Settings(model=model, n_tokens=4, dim=3), 0.05, rtol=1e-4)
        assert run.steps["method"] != "DOP853"


@pytest.mark.parametrize("branch, gamma, values", [
    ("DOP853", 2.0, {}), ("DOP853", 50.0, {}),
    ("DOP853", 2.0, {"mass": 2.5, "beta": 3.0, "confinement": 0.5}),
    ("composition", 2.0, {})])
def test_simulate_rtol_diagnostics_against_the_tight_reference(branch, gamma, values,
                                                              monkeypatch):
    """Both branches on one non-stiff run (the composition forced by lowering the
    threshold), and DOP853 near its threshold (λ = 50, where stability limits its step):
    features, dissipated energy, H and the tracking bound at t = 1 against an independent
    reference that carries ∫D and B as extra states (DOP853, rtol 1e-10)."""
    from stiff_reference import coupled_reference

    import dynamics.solvers.explicit

    if branch != "DOP853":
        monkeypatch.setattr(dynamics.solvers.explicit, "EXPLICIT_RATE", 0.0)
    s = Settings(model="canonical", n_tokens=5, dim=3, seed=3, gamma=gamma,
                 init_momentum="random", init_attention="random", **values)
    ref = coupled_reference(s, 1.0)
    run = simulate(s, 1.0, every=1, rtol=1e-8)
    assert run.steps["method"] == branch and run.times[-1] == 1.0
    d = {k: v[-1] for k, v in run.diagnostics.items()}
    errors = {"X": float(np.max(np.abs(run.features[-1] - ref["X"]))),
              **{k: abs(d[k] - ref[k]) / max(abs(ref[k]), 1e-12)
                 for k in ("dissipated", "hamiltonian", "kl_bound")}}
    print(branch, run.steps, errors)
    assert errors["X"] < 1e-7
    assert errors["dissipated"] < 1e-7 and errors["hamiltonian"] < 1e-7
    # the bound's field has kinks (osc), outside the error control: a looser tolerance
    assert errors["kl_bound"] < 1e-5
    assert d["work"] == 0.0
    assert np.all(np.abs(run.diagnostics["energy_residual"]) < 1e-7)
    assert np.all(run.diagnostics["kl"] <= run.diagnostics["kl_bound"] * (1 + 1e-9))


def test_first_step_measures_momenta_at_rest_at_the_state_scale():
    """P(0) = 0 and ∫D(0) = 0 measured against atol alone make the starting-step
    algorithm choose ~0.005 on the benchmark run (scipy's choice, checked here); measured
    at the state's scale it chooses a step near the run's own (0.1–0.2), and the run still
    meets its accuracy."""
    from scipy.integrate import DOP853

    from dynamics.solvers.explicit import canonical_field, first_step

    s = Settings(model="canonical", n_tokens=8, dim=4)
    sim = Simulation(s)
    st = sim.state
    y0 = np.concatenate([st.X.ravel(), st.P.ravel(), st.Z.ravel(), [0.0]])
    field = canonical_field(sim.problem, 8, 4)
    scipy_first = DOP853(field, 0.0, y0, 2.0, rtol=1e-4, atol=1e-6).h_abs
    ours = first_step(field, 0.0, y0, 2.0, 1e-4, 1e-6)
    print(f"first step: scipy {scipy_first:.3g}, ours {ours:.3g}")
    assert scipy_first < 0.01 < 0.05 < ours <= 2.0
    run = simulate(s, 2.0, every=1, rtol=1e-4)
    assert run.times[1] == pytest.approx(ours, rel=1e-12)
    X_ref = _reference_X(s, "DOP853", 1e-12, 2.0)
    assert np.max(np.abs(run.features[-1] - X_ref)) < 1e-5


def test_fused_field_of_a_real_head_keeps_its_constant_column_fixed():
    """A real head (its last feature column constant, ``fixed = 1``): the fused field
    against the readable one, and no force on that column."""
    from dynamics import models
    from dynamics.solvers.explicit import canonical_field

    sim = Simulation(Settings(model="canonical", weights="minilm", init_momentum="random"))
    prob, st = sim.problem, sim.state
    assert prob.fixed == 1
    rhs, y0, _ = models.get("canonical").readable["reference"](prob, st)
    N, d = st.X.shape
    got = canonical_field(prob, N, d)(0.0, y0)
    np.testing.assert_allclose(got, rhs(0.0, y0), rtol=1e-11, atol=1e-11)
    assert np.all(got[N * d:2 * N * d].reshape(N, d)[:, -1] == 0.0)


def test_first_step_is_scipy_s_where_every_component_is_at_the_state_scale():
    """Where every |y₀| component equals rms(y₀), our scale is scipy's, so the starting
    step must be DOP853's own, exponent 1/(7 + 1) of its error estimate included (a wrong
    order changes it by a factor ~2 here)."""
    from scipy.integrate import DOP853

    from dynamics.solvers.explicit import first_step

    def field(t, y):
        return np.sin(3.0 * t) - y**3 + 0.3 * y[::-1]

    y0 = np.array([0.7, -0.7, 0.7, 0.7, -0.7])
    for rtol, atol in ((1e-4, 1e-7), (1e-8, 1e-10)):
        scipy_first = DOP853(field, 0.0, y0, 10.0, rtol=rtol, atol=atol).h_abs
        assert first_step(field, 0.0, y0, 10.0, rtol, atol) == pytest.approx(scipy_first,
                                                                             rel=1e-12)
        assert first_step(field, 0.0, y0, 10.0, rtol, atol, order=8) != pytest.approx(
            scipy_first, rel=1e-3)


def test_rtol_run_counts_its_field_evaluations_and_rejected_steps_exactly(monkeypatch):
    """DOP853 branch, a run that rejects steps and ends at a norm-limit crossing (a dense
    output, one more evaluation at the crossing): ``nfev`` against a counting field and
    ``rejected`` against a count of scipy's attempted steps."""
    import scipy.integrate._ivp.rk as rk

    import dynamics.solvers.explicit as explicit

    calls = {"field": 0, "attempts": 0}
    make_field, rk_step = explicit.canonical_field, rk.rk_step

    def counting_field(*args, **kwargs):
        field = make_field(*args, **kwargs)

        def counted(t, y):
            calls["field"] += 1
            return field(t, y)
        return counted

    def counting_step(*args, **kwargs):
        calls["attempts"] += 1
        return rk_step(*args, **kwargs)

    monkeypatch.setattr(explicit, "canonical_field", counting_field)
    monkeypatch.setattr(rk, "rk_step", counting_step)
    s = Settings(model="canonical", n_tokens=6, dim=3, seed=5, confinement=0.0, beta=20.0,
                 norm_limit=20.0, init_momentum="random", dt=0.02)
    run = simulate(s, 6.0, every=10, rtol=1e-5)
    assert run.status == "diverged" and run.steps["method"] == "DOP853"
    assert run.steps["rejected"] > 0, "the test needs rejected steps"
    assert run.steps["nfev"] == calls["field"]
    assert run.steps["accepted"] + run.steps["rejected"] == calls["attempts"]


# -- states only ---------------------------------------------------------------------------
STATES_ONLY_RUNS = {
    "non-stiff canonical, rtol": ({"model": "canonical", "n_tokens": 6, "dim": 3}, 1e-5, 1),
    "the same, every 4 steps": ({"model": "canonical", "n_tokens": 6, "dim": 3,
                                 "init_momentum": "random"}, 1e-6, 4),
    "diverging canonical, rtol": ({"model": "canonical", "n_tokens": 4, "dim": 2, "seed": 5,
                                   "confinement": 0.0, "beta": 20.0, "norm_limit": 3.0,
                                   "init_momentum": "random"}, 1e-5, 1),
    "stiff canonical, rtol": ({"model": "canonical", "n_tokens": 4, "dim": 2,
                               "gamma": 1000.0}, 1e-5, 2),
    "attention, rtol": ({"model": "attention", "path": "rotation", "n_tokens": 4,
                         "dim": 2}, 1e-5, 1),
    "canonical, fixed dt": ({"model": "canonical", "n_tokens": 4, "dim": 2}, None, 7),
}


@pytest.mark.parametrize("values, rtol, every", STATES_ONLY_RUNS.values(),
                         ids=list(STATES_ONLY_RUNS))
def test_states_only_run_equals_the_full_run_s_states(values, rtol, every):
    settings = Settings(**values)
    full = simulate(settings, 2.0, every=every, rtol=rtol)
    states = simulate(settings, 2.0, every=every, rtol=rtol, diagnostics=False)
    for name in ("times", "features", "momenta", "attention"):
        assert np.array_equal(getattr(states, name), getattr(full, name)), name
    assert list(states.diagnostics) == ["t"]
    assert np.array_equal(states.diagnostics["t"], full.times)
    assert (states.status, states.settings) == (full.status, full.settings)
    assert (states.message, states.diverged_at) == (full.message, full.diverged_at)
    assert full.status == ("diverged" if "norm_limit" in values else "running")
    if rtol is not None:
        assert states.steps == full.steps
    assert len(full.times) > 2


def test_states_only_non_stiff_run_skips_the_diagnostics_and_the_engine(monkeypatch):
    """The states of a non-stiff canonical ``rtol`` run come straight from the solver: no
    frame's diagnostics, no tracking-bound quadrature, no engine step."""
    import dynamics.simulation
    import dynamics.solvers.explicit

    settings = Settings(model="canonical", n_tokens=8, dim=4)
    expected = simulate(settings, 2.0, every=2, rtol=1e-4)

    def refused(*args, **kwargs):
        raise AssertionError("diagnostics computed for a states-only run")

    monkeypatch.setattr(dynamics.solvers.explicit, "bound_steps", refused)
    monkeypatch.setattr(dynamics.simulation.Simulation, "frame", refused)
    monkeypatch.setattr(dynamics.simulation.Simulation, "advance", refused)
    states = simulate(settings, 2.0, every=2, rtol=1e-4, diagnostics=False)
    assert np.array_equal(states.features, expected.features)
    assert np.array_equal(states.attention, expected.attention)
