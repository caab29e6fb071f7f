"""The Part II streaming engine (contract of dynamics.inertial.engine)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynamics import Simulation
from dynamics.frame import DIVERGED, RUNNING
from dynamics.inertial import (
    InertialEngine,
    inertial_dissipation,
    inertial_force,
    inertial_hamiltonian,
    inertial_kinetic,
    inertial_velocity,
    model_field,
    softmax_kernel,
)
from dynamics.inertial.accelerated import accelerated_force, accelerated_velocity
from dynamics.inertial.engine import energies
from dynamics.inertial.linear import linear_velocity
from dynamics.settings import PART_II_MODELS, Settings

KEYS = {"t", "second_moment_max", "second_moment_min", "hamiltonian", "kinetic_energy",
        "feature_norm", "damping"}


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_default_settings_run_with_finite_diagnostics(model):
    eng = InertialEngine(Settings(model=model))
    eng.advance(200)
    f = eng.frame()
    assert KEYS <= set(f.diagnostics)
    assert all(np.isfinite(v) for v in f.diagnostics.values())
    assert np.all(np.isfinite(f.features)) and np.all(np.isfinite(f.momenta))
    assert f.features.shape == (8, 4) and f.status in (RUNNING, DIVERGED)
    if model in ("softmax_first_order", "softmax_inertial", "softmax_momentum"):
        assert np.allclose(f.attention.sum(1), 1, atol=1e-12)
    else:
        assert f.attention is None
    if model in ("linear", "softmax_first_order"):
        assert not f.momenta.any() and f.diagnostics["hamiltonian"] == 0.0


def test_divergence_stops_and_names_time():
    eng = InertialEngine(Settings(model="linear", value_diag="2", second_moment=1.0))
    eng.advance(200)
    assert eng.status == DIVERGED
    assert 0.25 <= eng.diverged_at <= 0.3  # T_max = 1/(2·1·2·1) = 0.25
    assert f"t = {eng.diverged_at:.3f}" in eng.message
    f = eng.frame()
    assert f.status == DIVERGED and f.message == eng.message
    assert all(np.isfinite(v) for v in f.diagnostics.values())
    t = eng.t
    eng.advance(10)
    assert eng.t == t
    eng.reset()
    assert eng.status == RUNNING and eng.t == 0.0 and eng.message == ""


def test_same_seed_same_frames_and_seed_matters():
    s = Settings(model="linear_accelerated", matrix_draw="random", cloud="student_t", seed=3)
    a, b = InertialEngine(s), InertialEngine(s.copy())
    a.advance(50)
    b.advance(50)
    np.testing.assert_array_equal(a.frame().features, b.frame().features)
    assert a.frame().diagnostics == b.frame().diagnostics
    c = InertialEngine(s.copy(seed=4))
    assert not np.array_equal(c.X0, a.X0)


def test_initial_state_and_hamiltonian():
    eng = InertialEngine(Settings(model="linear_accelerated", n_tokens=10, dim=3,
                                  second_moment=0.7, value_diag="1,2,3"))
    np.testing.assert_allclose(eng.X0.T @ eng.X0 / 10, 0.7 * np.eye(3), atol=1e-12)
    assert not eng.Y0.any()
    d = eng.frame().diagnostics
    # H(0) = −½ Σ x_iᵀ V x_i = −(N/2) tr(V S0)
    assert d["hamiltonian"] == pytest.approx(-5 * 0.7 * 6)
    assert d["second_moment_max"] == pytest.approx(0.7)


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_diag="1,2"), "kernel_diag needs"),
    (dict(kernel_diag="1,-1,1,1"), "positive definite"),
    (dict(value_diag="1,2,3"), "value_diag needs"),
    (dict(model="softmax_inertial", value_diag="-1"), "B = V A"),
    (dict(n_tokens=3, dim=5), "n_tokens >= dim"),
])
def test_invalid_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InertialEngine(Settings(**{"model": "linear", **kwargs}))


def test_settings_read_at_each_advance():
    s = Settings(model="linear_accelerated", dt=0.01)
    eng = InertialEngine(s)
    eng.advance(10)
    s.dt = 0.02
    s.damping, s.alpha = "nesterov", 0.5
    eng.advance(5)
    assert eng.t == pytest.approx(0.2)
    assert eng.frame().diagnostics["damping"] == pytest.approx(3.0 / 1.2 + 0.5)


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_measured_order_of_fixed_step_scheme(model):
    """Error vs a tight solve_ivp reference at dt, dt/2, dt/4: fitted order ≥ 1.8."""
    s = Settings(model=model, damping="nesterov", alpha=0.5, matrix_draw="random",
                 second_moment=0.3, n_tokens=6, dim=3)
    eng = InertialEngine(s)
    f = model_field(model, eng.A, eng.V, eng.B, eng.damping)
    T = 0.4
    z0 = np.stack([eng.X0, eng.Y0 + 0.2])  # nonzero momenta exercise the whole field
    ref = solve_ivp(lambda t, y: f(t, y.reshape(z0.shape)).ravel(), (0, T), z0.ravel(),
                    method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    errors = []
    dts = np.array([0.04, 0.02, 0.01])
    for dt in dts:
        s.dt = dt
        eng.reset()
        eng.Z = z0.copy()
        eng.advance(int(round(T / dt)))
        errors.append(np.abs(eng.Z.ravel() - ref).max())
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    print(f"{model}: errors {errors}, measured order {order:.2f}")
    assert order >= 1.8


def test_runaway_momenta_stop_the_run_with_finite_diagnostics():
    """softmax_inertial at its defaults: H → −∞ drives the momenta to blow up; the run
    stops at the step where ‖Y‖ passes norm_limit (or where the energy would rise,
    which dH/dt ≤ 0 forbids), with every reported value finite."""
    sim = Simulation(Settings(model="softmax_inertial"))
    frame = sim.step(1000)
    assert sim.status == "diverged" and sim.diverged_at is not None
    assert "diverged at t =" in sim.message
    assert sim.diverged_at < 1.0
    assert all(np.isfinite(v) for v in frame.diagnostics.values())
    assert np.all(np.isfinite(frame.momenta)) and np.all(np.isfinite(frame.features))


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_engine_field_is_the_model_equations(model):
    """The engine's field (products shared between terms, a reused buffer) equals the
    equations as the model modules write them (MODEL.md §10–§13), term by term."""
    s = Settings(model=model, damping="nesterov", alpha=0.5, matrix_draw="random",
                 second_moment=0.3, n_tokens=7, dim=3)
    eng = InertialEngine(s)
    f = model_field(model, eng.A, eng.V, eng.B, eng.damping)
    rng = np.random.default_rng(5)
    X, Y = eng.X0, 0.4 * rng.standard_normal(eng.X0.shape)
    t = 0.3
    rate = eng.damping.rate(t)
    expected = {
        "linear": (linear_velocity(X, eng.A, eng.V), np.zeros_like(Y)),
        "linear_accelerated": (accelerated_velocity(X, Y, eng.A),
                               -rate * Y + accelerated_force(X, Y, eng.A, eng.V)),
        "softmax_first_order": (softmax_kernel(X, eng.A) @ (X @ eng.V), np.zeros_like(Y)),
        "softmax_momentum": (Y, -rate * Y + softmax_kernel(X, eng.A) @ (X @ eng.V)),
        "softmax_inertial": None,  # needs B = V A⁻¹, which only this model has
    }[model]
    if model == "softmax_inertial":
        expected = (inertial_velocity(X, Y, eng.A, eng.B),
                    -rate * Y + inertial_force(X, Y, eng.A, eng.B))
    for _ in range(2):  # the second call reuses the field's buffers
        got = f(t, np.stack([X, Y]))
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)
    if model == "softmax_inertial":  # and the energies of its stop tests, at once
        reference = (inertial_hamiltonian(X, Y, eng.A, eng.B),
                     inertial_kinetic(X, Y, eng.A, eng.B),
                     inertial_dissipation(X, Y, eng.A, eng.B))
        assert energies(model, X, Y, eng.A, eng.V, eng.B) == pytest.approx(reference,
                                                                         rel=1e-12)


def test_damping_changed_between_advances_takes_effect():
    """The engine keeps its field between calls; a changed damping rate rebuilds it (the
    same run as one that had the new rate from that time on)."""
    from dynamics.inertial.damping import Damping
    from dynamics.inertial.integrators import rk4_step

    s = Settings(model="linear_accelerated", value_diag="-1", damping="constant", alpha=0.0)
    eng = InertialEngine(s)
    eng.advance(5)
    Z = eng.Z.copy()
    s.alpha = 2.0
    eng.advance(5)
    f = model_field(s.model, eng.A, eng.V, None, Damping.from_settings(s))
    t = 5 * s.dt
    for _ in range(5):
        Z = rk4_step(f, t, Z, s.dt)
        t += s.dt
    np.testing.assert_allclose(eng.Z, Z, rtol=1e-13, atol=1e-15)
    assert eng.frame().diagnostics["damping"] == 2.0
