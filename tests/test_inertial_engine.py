"""The Part II models through the one loop of Simulation: their specs (dynamics.models),
the RK4 stepper (dynamics.steppers.rk4), the shared build, diagnostics and stop tests
(dynamics.models.part_two)."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynamics import Settings, Simulation, models
from dynamics.diagnostics import PART_TWO as DIAGNOSTICS
from dynamics.frame import DIVERGED, RUNNING
from dynamics.inertial import (
    inertial_dissipation,
    inertial_hamiltonian,
    inertial_kinetic,
    softmax_kernel,
)
from dynamics.inertial.accelerated import accelerated_dissipation, accelerated_kinetic
from dynamics.models import momentum_quadratic, part_two
from dynamics.settings import PART_II_MODELS
from dynamics.steppers import RK4
from dynamics.workspace import Workspace

SOFTMAX = ("softmax_first_order", "softmax_inertial", "softmax_momentum")
FIRST_ORDER = ("linear", "softmax_first_order")
#: Diagnostics a model reports beyond the Part II ones.
EXTRA_DIAGNOSTICS = {"momentum_quadratic": momentum_quadratic.EXTRA_DIAGNOSTICS}
#: Settings of each model's order run: moving, bounded over the horizon.
ORDER_CASES = {
    "momentum_quadratic": {},
    "linear": {},
    "linear_accelerated": {},
    "softmax_first_order": {},
    "softmax_inertial": {"second_moment": 0.1, "value_diag": "0.1"},
    "softmax_momentum": {},
}


def test_part_two_models_are_registered_in_order_with_rk4():
    assert PART_II_MODELS == ("momentum_quadratic", "linear", "linear_accelerated",
                              "softmax_first_order", "softmax_inertial", "softmax_momentum")
    for name in PART_II_MODELS:
        spec = models.get(name)
        # (the base case's RK4 also integrates the dissipated energy on its stages)
        assert spec.part == 2 and issubclass(spec.stepper, RK4) and spec.stepper.order == 4
        assert (spec.stepper is RK4) == (name != "momentum_quadratic")
        assert spec.energy_settings == ()
        assert set(spec.continue_settings) == {"dt", "damping", "alpha", "nesterov_r",
                                               "nesterov_t0"}
        assert {"kernel_diag", "matrix_draw", "cloud",
                "second_moment"} <= set(spec.restart_settings())
        # the base case has no value matrix
        assert ("value_diag" in spec.restart_settings()) == (name != "momentum_quadratic")
        assert "field" in spec.readable and "reference" in spec.readable
        assert (spec.energy is not None) == (name in ("momentum_quadratic",
                                                      "linear_accelerated",
                                                      "softmax_inertial"))


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_default_settings_run_with_finite_diagnostics(model):
    sim = Simulation(Settings(model=model))
    f = sim.step(200)
    assert tuple(f.diagnostics) == DIAGNOSTICS + EXTRA_DIAGNOSTICS.get(model, ())
    assert all(np.isfinite(v) for v in f.diagnostics.values())
    assert np.all(np.isfinite(f.features)) and np.all(np.isfinite(f.momenta))
    assert f.features.shape == (8, 4) and f.status in (RUNNING, DIVERGED)
    if model in SOFTMAX:
        np.testing.assert_allclose(f.attention.sum(1), 1, atol=1e-12)
        np.testing.assert_array_equal(f.attention, softmax_kernel(f.features, sim.problem.A))
    else:
        assert f.attention is None
    if model in FIRST_ORDER:
        assert not f.momenta.any() and f.diagnostics["hamiltonian"] == 0.0


def test_divergence_stops_and_names_time():
    sim = Simulation(Settings(model="linear", value_diag="2", second_moment=1.0))
    sim.advance(200)
    assert sim.status == DIVERGED
    assert 0.25 <= sim.diverged_at <= 0.3  # T_max = 1/(2·1·2·1) = 0.25
    assert sim.message.startswith(f"diverged at t = {sim.diverged_at:.4g}: ")
    f = sim.frame()
    assert f.status == DIVERGED and f.message == sim.message
    assert all(np.isfinite(v) for v in f.diagnostics.values())
    # the feature norm passed norm_limit: the state that passed it is kept, and the run
    # stops (λ_max(S) passed it too)
    assert "feature norm" in sim.message and f.diagnostics["feature_norm"] > 1e6
    assert f.diagnostics["second_moment_max"] > 1e6
    assert f.t == sim.diverged_at
    t = sim.t
    sim.advance(10)
    assert sim.t == t
    sim.reset()
    assert sim.status == RUNNING and sim.t == 0.0 and sim.message == ""


def test_a_non_finite_step_is_rejected():
    """A step far past the blow-up overflows: the run stops on the last finite state."""
    sim = Simulation(Settings(model="linear", value_diag="1000", second_moment=100.0,
                              dt=1.0, norm_limit=1e12))
    sim.advance(20)
    assert sim.status == DIVERGED and "non-finite" in sim.message
    assert np.all(np.isfinite(sim.state.X)) and sim.t == 0.0 and sim.diverged_at == 1.0


def test_check_rejects_non_finite_momenta_and_keeps_the_energy():
    """The stop test on its own: a state with infinite momenta (finite features) is
    rejected; a step goes on, its memo being H of the state it accepted; a state whose H
    rose is kept and stops the run."""
    sim = Simulation(Settings(model="linear_accelerated"))
    prob, st = sim.problem, sim.state
    bad = replace(st, t=0.01, P=np.full_like(st.P, np.inf))
    reason, accept, memo = part_two.check(prob, st, bad, None, 1e6)
    assert "non-finite" in reason and not accept and memo == sim.energy()
    sim.advance(1)
    good = sim.state
    reason, accept, memo = part_two.check(prob, st, good, part_two.energy(prob, st), 1e6)
    assert reason is None and accept and memo == sim.energy()
    up = replace(good, P=good.P + 0.1)  # more kinetic energy: H rose although dH/dt ≤ 0
    reason, accept, memo = part_two.check(prob, good, up, memo, 1e6)
    assert "energy increased" in reason and accept and memo == part_two.energy(prob, up)


def test_norm_limit_changed_mid_run_applies_to_the_next_step():
    s = Settings(model="linear_accelerated")
    sim = Simulation(s)
    sim.advance(5)
    norm = sim.frame().diagnostics["feature_norm"]
    s.norm_limit = 1.0  # below the feature norm (≈ 4)
    sim.advance(5)
    f = sim.frame()
    assert sim.status == DIVERGED and "feature norm" in sim.message
    assert f.t == pytest.approx(0.06) and f.diagnostics["feature_norm"] > 1.0 and norm > 1.0


def test_energy_increase_of_a_dissipative_model_stops_the_run():
    """Too large a step for the inertial model: H(new) > H(old) although dH/dt ≤ 0; the
    state where it rose is kept."""
    s = Settings(model="softmax_inertial", n_tokens=12, dim=3, seed=5, dt=0.2, alpha=0.5,
                 second_moment=0.2, value_diag="1.5", kernel_diag="0.8", matrix_draw="random")
    sim = Simulation(s)
    energies = [sim.energy()]
    while sim.status == RUNNING and sim.t < 4.0:
        sim.advance(1)
        energies.append(sim.energy())
    assert sim.status == DIVERGED and "energy increased" in sim.message
    assert energies[-1] > energies[-2] and np.all(np.diff(energies[:-1]) <= 0)
    assert sim.frame().diagnostics["hamiltonian"] == energies[-1]


def test_same_seed_same_frames_and_seed_matters():
    s = Settings(model="linear_accelerated", matrix_draw="random", cloud="student_t", seed=3)
    a, b = Simulation(s), Simulation(s.copy())
    a.advance(50)
    b.advance(50)
    np.testing.assert_array_equal(a.frame().features, b.frame().features)
    assert a.frame().diagnostics == b.frame().diagnostics
    c = Simulation(s.copy(seed=4))
    assert not np.array_equal(c.state.X, Simulation(s.copy()).state.X)


def test_initial_state_and_hamiltonian():
    sim = Simulation(Settings(model="linear_accelerated", n_tokens=10, dim=3,
                              second_moment=0.7, value_diag="1,2,3"))
    X0 = sim.state.X
    np.testing.assert_allclose(X0.T @ X0 / 10, 0.7 * np.eye(3), atol=1e-12)
    assert not sim.state.P.any()
    d = sim.frame().diagnostics
    # H(0) = −½ Σ x_iᵀ V x_i = −(N/2) tr(V S0)
    assert d["hamiltonian"] == pytest.approx(-5 * 0.7 * 6) == sim.energy()
    assert d["second_moment_max"] == pytest.approx(0.7)


def test_given_features_and_momenta_are_honoured():
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    sim = Simulation(Settings(model="linear_accelerated", n_tokens=5, dim=2),
                     features=X, momenta=Y)
    np.testing.assert_array_equal(sim.state.X, X)
    np.testing.assert_array_equal(sim.state.P, Y)
    with pytest.raises(ValueError, match="has no momenta"):  # a first-order model
        Simulation(Settings(model="softmax_first_order", n_tokens=5, dim=2),
                   features=X, momenta=Y)
    first = Simulation(Settings(model="softmax_first_order", n_tokens=5, dim=2), features=X)
    np.testing.assert_array_equal(first.state.X, X)
    assert not first.state.P.any()
    with pytest.raises(ValueError, match="shape"):
        Simulation(Settings(model="linear", n_tokens=5, dim=2), features=X[:4])


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_diag="1,2"), "kernel_diag needs"),
    (dict(kernel_diag="1,-1,1,1"), "positive definite"),
    (dict(value_diag="1,2,3"), "value_diag needs"),
    (dict(model="softmax_inertial", value_diag="-1"), "B = V A"),
    (dict(n_tokens=3, dim=5), "n_tokens >= dim"),
])
def test_invalid_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Simulation(Settings(**{"model": "linear", **kwargs}))


def test_settings_read_at_each_advance():
    s = Settings(model="linear_accelerated", dt=0.01)
    sim = Simulation(s)
    sim.advance(10)
    s.dt = 0.02
    s.damping, s.alpha = "nesterov", 0.5
    sim.advance(5)
    assert sim.t == pytest.approx(0.2)
    assert sim.frame().diagnostics["damping"] == pytest.approx(3.0 / 1.2 + 0.5)


def test_setting_changes_continue_or_restart():
    s = Settings(model="softmax_momentum")
    sim = Simulation(s)
    sim.advance(3)
    s.beta = 2.0  # not read by Part II
    assert sim.sync() is None and sim.t > 0
    s.alpha = 0.3
    assert sim.sync() == "continue" and sim.changes[-1].work == 0.0
    assert sim.problem.damping.c == 0.3
    s.second_moment = 0.4
    assert sim.sync() == "restart" and sim.t == 0.0


def test_damping_changed_mid_run_continues_from_the_state():
    """A changed damping rate continues the run: the same steps as a run started from
    that state with the new rate (constant damping, so the clock does not matter)."""
    s = Settings(model="linear_accelerated", value_diag="-1", damping="constant", alpha=0.0)
    sim = Simulation(s)
    sim.advance(5)
    X, Y = sim.state.X, sim.state.P
    s.alpha = 2.0
    sim.advance(5)
    assert [c.values for c in sim.changes] == [{"alpha": (0.0, 2.0)}]
    fresh = Simulation(s.copy(), features=X, momenta=Y)
    fresh.advance(5)
    np.testing.assert_array_equal(sim.state.X, fresh.state.X)
    np.testing.assert_array_equal(sim.state.P, fresh.state.P)
    assert sim.frame().diagnostics["damping"] == 2.0


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_measured_order_of_rk4_against_an_independent_reference(model):
    """Errors at dt, dt/2, dt/4 against solve_ivp (DOP853, rtol 1e-12) on the model's
    readable field: fitted order ≥ 3.8 (RK4 is order 4)."""
    s = Settings(model=model, damping="nesterov", alpha=0.5, matrix_draw="random",
                 n_tokens=6, dim=3, **{"second_moment": 0.3, **ORDER_CASES[model]})
    start = Simulation(s)
    prob, X0 = start.problem, start.state.X
    Y0 = np.full_like(X0, 0.2)  # nonzero momenta exercise the whole field
    field = models.get(model).readable["field"]
    n, d = X0.shape

    def rhs(t, y):
        dX, dY = field(prob, t, y[:n * d].reshape(n, d), y[n * d:].reshape(n, d))
        return np.concatenate([dX.ravel(), dY.ravel()])

    T = 0.8
    ref = solve_ivp(rhs, (0, T), np.concatenate([X0.ravel(), Y0.ravel()]),
                    method="DOP853", rtol=1e-12, atol=1e-14).y[:, -1]
    if model in FIRST_ORDER:
        ref = ref[:n * d]  # the momenta are not a variable of a first-order model
    errors, dts = [], np.array([0.1, 0.05, 0.025])
    for dt in dts:
        given = {"features": X0} if model in FIRST_ORDER else {"features": X0, "momenta": Y0}
        sim = Simulation(s.copy(dt=dt), **given)
        sim.advance(int(round(T / dt)))
        assert sim.status == RUNNING and sim.t == pytest.approx(T)
        got = sim.state.X.ravel() if model in FIRST_ORDER else \
            np.concatenate([sim.state.X.ravel(), sim.state.P.ravel()])
        errors.append(np.abs(got - ref).max())
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    print(f"{model}: errors {errors}, measured order {order:.2f}")
    assert errors[-1] > 1e-10 * np.abs(ref).max()  # well above the reference's error
    assert order >= 3.8


def test_inertial_defaults_run_with_growing_momenta_and_moderate_velocities():
    """softmax_inertial at its defaults (mean-field normalisation) runs past t = 10: H only
    decreases, the momenta grow like z_i while the velocities B y_i / z_i stay moderate,
    every reported value finite. (The earlier normalisation, with sums, stopped before
    t = 1.)"""
    sim = Simulation(Settings(model="softmax_inertial"))
    energies = []
    for _ in range(10):
        frame = sim.step(100)
        energies.append(frame.diagnostics["hamiltonian"])
    assert sim.status == RUNNING and sim.t == pytest.approx(10.0)
    assert np.all(np.diff(energies) < 0)
    prob, st = sim.problem, sim.state
    speed = prob.measures(st.X, st.P)[3]
    assert frame.diagnostics["momentum_norm"] > 1e3 * speed and speed < 100
    assert all(np.isfinite(v) for v in frame.diagnostics.values())


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_fused_field_is_the_readable_field(model):
    """The field the stepper calls (products shared between terms, shifted exponentials,
    a reused buffer) equals the model's readable field, term by term."""
    s = Settings(model=model, damping="nesterov", alpha=0.5, matrix_draw="random",
                 second_moment=0.3, n_tokens=7, dim=3)
    prob = Simulation(s).problem
    X = Simulation(s).state.X
    Y = 0.4 * np.random.default_rng(5).standard_normal(X.shape)
    t = 0.3
    expected = models.get(model).readable["field"](prob, t, X, Y)
    work = Workspace()
    for _ in range(2):  # the second call reuses the field's buffers
        got = prob.field(t, np.stack([X, Y]), work)
        assert got.shape == (2, 7, 3)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("model", ["linear_accelerated", "softmax_inertial"])
def test_fused_energies_are_the_readable_ones(model):
    """``(H, kinetic, Σ y·∂H/∂y)`` of the stop tests and diagnostics, at once, equal the
    readable Hamiltonian and its parts; ``dH/dt = −α`` times the last."""
    s = Settings(model=model, matrix_draw="random", second_moment=0.3, n_tokens=7, dim=3)
    sim = Simulation(s)
    prob, X = sim.problem, sim.state.X
    Y = 0.4 * np.random.default_rng(6).standard_normal(X.shape)
    readable = models.get(model).readable
    A, B = prob.A, prob.B
    if model == "linear_accelerated":
        kinetic, dissipation = accelerated_kinetic(X, Y, A), accelerated_dissipation(X, Y, A)
    else:
        kinetic, dissipation = inertial_kinetic(X, Y, A, B), inertial_dissipation(X, Y, A, B)
    reference = (readable["hamiltonian"](prob, X, Y), kinetic, dissipation)
    assert prob.energies(X, Y) == pytest.approx(reference, rel=1e-12)
    if model == "softmax_inertial":
        assert reference[0] == pytest.approx(inertial_hamiltonian(X, Y, A, B), rel=1e-15)
    # Σ y·∂H/∂y is y·(readable velocity)
    velocity = readable["velocity"](prob, X, Y)
    assert dissipation == pytest.approx(float(np.sum(Y * velocity)), rel=1e-12)


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_rk4_step_leaves_its_inputs_alone(model):
    """Rule 4 of the stepper contract: a step never writes the state or the carry it
    starts from (the same step twice gives the same state); t advances by h."""
    sim = Simulation(Settings(model=model, n_tokens=6, dim=3))
    prob, st = sim.problem, sim.state
    st = replace(st, P=np.full_like(st.P, 0.1))
    stepper = RK4(prob)
    carry = stepper.start(st)
    before = (st.X.copy(), st.P.copy(), carry.y.copy())
    a, carry_a = stepper.step(st, carry, 0.01)
    b, _ = stepper.step(st, carry, 0.01)
    for kept, now in zip(before, (st.X, st.P, carry.y), strict=True):
        np.testing.assert_array_equal(kept, now)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.P, b.P)
    assert a.t == st.t + 0.01 and a.Z is None and a.A is None
    np.testing.assert_array_equal(carry_a.y, np.stack([a.X, a.P]))
