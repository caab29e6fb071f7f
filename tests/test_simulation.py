"""The stepping engine (MODEL.md §9, Part III): diagnostics, divergence, validation,
reproducibility and changes between steps."""

import math
from dataclasses import replace

import numpy as np
import param
import pytest

from dynamics import (
    DIAGNOSTICS,
    NOT_APPLICABLE,
    PART_I_MODELS,
    PATHS,
    Settings,
    Simulation,
    simulate,
)
from dynamics import energy as en
from dynamics.steppers import DeferredOverflow, Strang, TrackedEtdVerlet

SMALL = dict(n_tokens=4, dim=3, dt=0.02)


# --- §9 diagnostics ------------------------------------------------------------------------
def part_one_runs():
    for model in PART_I_MODELS:
        paths = PATHS if model == "attention" else ("rotation",)
        for path in paths:
            yield model, path


@pytest.mark.parametrize("model, path", list(part_one_runs()))
def test_every_diagnostic_present_finite_and_consistent(model, path):
    s = Settings(model=model, path=path, init_attention="random", init_momentum="random",
                 seed=5, switch_time=0.5, **SMALL)
    sim = Simulation(s)
    frames = [sim.frame()] + [sim.step(5) for _ in range(10)]
    beta, gamma = s.beta, s.gamma
    for f in frames:
        d = f.diagnostics
        assert tuple(d) == DIAGNOSTICS
        assert d["t"] == f.t
        for name, value in d.items():
            if name in NOT_APPLICABLE.get(model, ()):
                assert math.isnan(value), name
            else:
                assert math.isfinite(value), name
        assert d["row_sum_error"] <= 1e-12
        assert d["min_attention"] > 0.0 and d["min_attention"] == f.attention.min()
        assert d["kl"] >= 0.0 and d["kl_target"] >= 0.0 and d["dissipation_rate"] >= 0.0
        assert d["dissipated"] >= 0.0
        assert d["kl"] == pytest.approx(float(np.sum(f.kl_rows)), rel=1e-12, abs=1e-300)
        # frame arrays agree with the definitions of §9
        S = en.scores(f.features, sim.problem.M)
        np.testing.assert_allclose(f.softmax, en.softmax_attention(S, beta), atol=1e-13)
        log_a = np.log(f.attention)
        np.testing.assert_allclose(f.kl_rows, en.kl_rows(log_a, np.log(f.softmax)),
                                   rtol=1e-6, atol=1e-12)
        assert d["feature_norm"] == pytest.approx(np.linalg.norm(f.features), rel=1e-14)
        assert d["entropy_mean"] == pytest.approx(float(np.mean(en.entropy_rows(f.attention))),
                                                  rel=1e-10)
        assert d["potential"] == pytest.approx(en.potential(S, beta), rel=1e-12, abs=1e-12)
        F = en.free_energy(f.attention, S, beta)
        assert d["free_energy"] == pytest.approx(F, rel=1e-10, abs=1e-12)
        # gap identity on the reported numbers (every model)
        assert d["free_energy"] - d["potential"] == pytest.approx(
            d["kl"] / beta, abs=1e-10 * (abs(d["free_energy"]) + abs(d["potential"]) + 1))
        if model in ("attention", "canonical"):
            assert d["kl_target"] == pytest.approx(d["kl"], rel=1e-12, abs=1e-300)
            np.testing.assert_allclose(f.target, f.softmax, atol=1e-13)
        if model == "attention":
            assert d["hamiltonian"] == d["free_energy"] and d["kinetic_energy"] == 0.0
            C = en.marginal_costs(log_a, S, beta)
            assert d["dissipation_rate"] == pytest.approx(
                en.dissipation_rate(f.attention, C, gamma), rel=1e-8, abs=1e-15)
        elif model not in ("transformer",):
            H = sim.energy() if f is frames[-1] else None
            if H is not None:
                assert d["hamiltonian"] == pytest.approx(H, rel=1e-14)
        if model not in ("attention",):
            assert d["work"] == 0.0


def test_energy_residual_is_zero_at_start():
    for model in PART_I_MODELS:
        d = Simulation(Settings(model=model, **SMALL)).frame().diagnostics
        if model != "transformer":
            assert d["energy_residual"] == 0.0
            assert d["dissipated"] == 0.0 and d["work"] == 0.0


# --- divergence ---------------------------------------------------------------------------
def test_unconfined_canonical_run_diverges_cleanly():
    s = Settings(model="canonical", confinement=0.0, beta=2.0, n_tokens=6, dim=4,
                 seed=0, norm_limit=10.0, init_momentum="random", dt=0.02)
    traj = simulate(s, t_end=50.0, every=5)
    summary = traj.summary()
    assert traj.status == "diverged" and summary["status"] == "diverged"
    assert traj.diverged_at is not None and 0 < traj.diverged_at < 50.0
    assert summary["diverged_at"] == traj.diverged_at
    assert "diverged at t =" in traj.message
    assert traj.times[-1] <= traj.diverged_at
    for name, values in traj.diagnostics.items():
        assert np.isfinite(values[-1]), name
    assert np.all(np.isfinite(traj.features[-1])) and traj.diagnostics["feature_norm"][-1] <= 10


def test_tiny_norm_limit_stops_at_first_step_and_stays_stopped():
    sim = Simulation(Settings(model="canonical", norm_limit=1.0, **SMALL))
    X0 = sim.state.X
    frame = sim.step(10)
    assert frame.status == "diverged" and sim.diverged_at == pytest.approx(0.02)
    assert "diverged at t =" in frame.message and "norm" in frame.message
    assert frame.t == 0.0
    np.testing.assert_array_equal(frame.features, X0)
    assert all(math.isfinite(v) for k, v in frame.diagnostics.items())
    assert sim.step(5).t == 0.0  # a diverged run does not advance
    sim.settings.norm_limit = 1e6  # energy/limit change does not restart ...
    assert sim.step(1).status == "diverged"
    assert sim.reset().status == "running"  # ... Reset does
    assert sim.step(1).t == pytest.approx(0.02)


def test_overflow_is_reported_as_divergence():
    """A non-finite value stops the run with a clear status instead of raising."""
    s = Settings(model="canonical", confinement=0.0, beta=2.0, n_tokens=6, dim=4,
                 seed=0, norm_limit=1e12, init_momentum="random", dt=0.05, mass=0.01)
    traj = simulate(s, t_end=200.0, every=20)
    assert traj.status == "diverged" and "diverged at t =" in traj.message
    assert all(np.isfinite(v[-1]) for v in traj.diagnostics.values())


# --- bad input ----------------------------------------------------------------------------
def bounded_params():
    for name in Settings.names():
        p = Settings.param[name]
        if isinstance(p, param.Number) and p.bounds is not None:
            yield name, p


def outside_values(p):
    lo, hi = p.bounds
    integer = isinstance(p, param.Integer)
    if lo is not None:
        yield lo - 1 if integer else float(np.nextafter(lo, -np.inf))
    if hi is not None:
        yield hi + 1 if integer else float(np.nextafter(hi, np.inf))


def names_range(msg, lo, hi):
    """The message shows the interval [lo, hi] (in %g or plain spelling)."""
    return any(f"[{a}, {b}]" in msg for a in (f"{lo:g}", str(lo), repr(float(lo)))
               for b in (f"{hi:g}", str(hi), repr(float(hi))))


@pytest.mark.parametrize("name, p", list(bounded_params()), ids=lambda v: str(v)[:20])
def test_out_of_range_settings_are_refused_with_parameter_and_range(name, p):
    lo, hi = p.bounds
    values = list(outside_values(p))
    if not isinstance(p, param.Integer):
        values += [math.nan, math.inf, -math.inf]
    for value in values:
        with pytest.raises(ValueError) as info:
            Settings(**{name: value})
        msg = str(info.value)
        assert name in msg and names_range(msg, lo, hi), (value, msg)
        s = Settings()
        with pytest.raises(ValueError, match=name):
            setattr(s, name, value)
    # the bounds themselves are accepted
    for value in (lo, hi):
        assert getattr(Settings(**{name: value}), name) == value


@pytest.mark.parametrize("name", ["n_tokens", "dim", "seed"])
def test_non_finite_or_fractional_integer_settings_name_their_range(name):
    lo, hi = Settings.param[name].bounds
    for value in (math.nan, math.inf, -math.inf, 2.5):
        with pytest.raises(ValueError) as info:
            Settings(**{name: value})
        msg = str(info.value)
        assert name in msg and names_range(msg, lo, hi), (value, msg)


def test_bad_selectors_and_step_counts_are_refused():
    with pytest.raises(ValueError, match="model"):
        Settings(model="nonsense")
    with pytest.raises(ValueError, match="path"):
        Settings(path="spiral")
    sim = Simulation(Settings(**SMALL))
    for n in (-1, 1.5):
        with pytest.raises(ValueError, match="n must be"):
            sim.step(n)
    with pytest.raises(ValueError, match="t_end"):
        simulate(Settings(**SMALL), t_end=-1.0)
    with pytest.raises(ValueError, match="every"):
        simulate(Settings(**SMALL), t_end=1.0, every=0)


# --- reproducibility ----------------------------------------------------------------------
def test_same_settings_same_frames():
    s = Settings(model="value_matching", init_momentum="random", init_attention="random",
                 **SMALL)
    a, b = simulate(s, t_end=1.0), simulate(s.copy(), t_end=1.0)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.attention, b.attention)
    assert a.to_csv() == b.to_csv()


@pytest.mark.parametrize("model", ["canonical", "cotangent_lift"])
def test_step_chunking_gives_byte_identical_csv(model):
    from dynamics.trajectory import Trajectory

    s = Settings(model=model, n_tokens=3, dim=2, dt=0.01, init_momentum="random")
    one = Simulation(s)
    frames_one = [one.frame(), one.step(1000)]
    ten = Simulation(s.copy())
    f0 = ten.frame()
    for _ in range(10):
        last = ten.step(100)
    frames_ten = [f0, last]
    a = Trajectory.from_frames(s, frames_one, one).to_csv()
    b = Trajectory.from_frames(s, frames_ten, ten).to_csv()
    assert a == b
    assert frames_one[-1].t == pytest.approx(10.0)
    # and recording every step or every 100th gives the same rows
    every = simulate(s, t_end=1.0, every=50).to_dataframe()
    full = simulate(s, t_end=1.0, every=1).to_dataframe().iloc[::50].reset_index(drop=True)
    assert every.to_csv(index=False) == full.to_csv(index=False)


def test_seed_fixes_initial_data_independently_of_model():
    models = ("canonical", "value_matching", "cotangent_lift", "reduced")
    sims = [Simulation(Settings(model=m, seed=42, init_momentum="random", **SMALL))
            for m in models]
    ref = sims[0]
    assert np.abs(ref.state.P).max() > 0
    for sim in sims[1:]:
        np.testing.assert_array_equal(sim.state.X, ref.state.X)
        np.testing.assert_array_equal(sim.state.P, ref.state.P)
        np.testing.assert_array_equal(sim.problem.M, ref.problem.M)
        np.testing.assert_array_equal(sim.problem.W_V, ref.problem.W_V)
    for other in ("attention", "transformer"):
        sim = Simulation(Settings(model=other, seed=42, **SMALL))
        np.testing.assert_allclose(sim.state.X, ref.state.X, atol=1e-14)
        np.testing.assert_array_equal(sim.problem.M, ref.problem.M)
        np.testing.assert_array_equal(sim.problem.W_V, ref.problem.W_V)
    other_seed = Simulation(Settings(model="canonical", seed=43, **SMALL))
    assert not np.array_equal(other_seed.state.X, ref.state.X)


# --- mid-run changes ----------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [("beta", 3.0), ("gamma", 5.0), ("kappa", 2.0),
                                         ("confinement", 4.0), ("dt", 0.01)])
def test_energy_setting_change_continues_from_current_state(name, value):
    s = Settings(model="canonical", init_momentum="random", **SMALL)
    sim = Simulation(s)
    before = sim.step(25)
    s.param.update(**{name: value})
    same = sim.step(0)
    assert same.t == before.t
    np.testing.assert_array_equal(same.features, before.features)
    np.testing.assert_array_equal(same.attention, before.attention)
    assert same.diagnostics["energy_residual"] == pytest.approx(
        before.diagnostics["energy_residual"], abs=1e-12)
    after = sim.step(10)
    assert after.t == pytest.approx(before.t + 10 * s.dt)
    # the change does protocol work: no jump of the residual, only integrator error after
    assert abs(after.diagnostics["energy_residual"]) <= 1e-2 * after.diagnostics["dissipated"]
    if name == "beta":
        assert sim.problem.beta == 3.0


@pytest.mark.parametrize("model", ["attention", "canonical", "value_matching",
                                   "cotangent_lift", "reduced"])
def test_quench_does_protocol_work(model):
    """A β change at fixed state adds E_new(state) − E_old(state) to ``work``: the energy
    jumps, ``work`` jumps by the same amount, E(0) is kept and the residual stays."""
    s = Settings(model=model, init_momentum="random", **SMALL)
    sim = Simulation(s)
    before = sim.step(25)
    E_old = sim.energy()
    s.beta = 4.0
    E_new = sim.energy()  # not yet applied: the change waits for the next advance
    assert E_new == E_old
    same = sim.step(0)
    (change,) = sim.changes
    assert change.t == before.t and change.values == {"beta": (1.0, 4.0)}
    E_new = sim.energy()
    assert change.work == pytest.approx(E_new - E_old, rel=1e-13, abs=1e-13)
    assert abs(change.work) > 1e-3  # a real jump, seen on the energy plot
    d0, d1 = before.diagnostics, same.diagnostics
    assert d1["work"] - d0["work"] == pytest.approx(change.work, rel=1e-12, abs=1e-13)
    assert d1["hamiltonian"] - d0["hamiltonian"] == pytest.approx(change.work, rel=1e-12,
                                                                  abs=1e-13)
    assert d1["energy_residual"] == pytest.approx(d0["energy_residual"], abs=1e-12)
    # a γ change enters no energy: no work
    s.gamma = 3.0
    sim.step(0)
    assert sim.changes[-1].work == 0.0 or model == "reduced"


def test_restart_setting_change_restarts():
    s = Settings(model="canonical", **SMALL)
    sim = Simulation(s)
    sim.step(25)
    s.n_tokens = 5
    frame = sim.step(1)
    assert frame.t == pytest.approx(s.dt)
    assert frame.features.shape == (5, 3) and frame.attention.shape == (5, 5)
    assert frame.diagnostics["dissipated"] >= 0.0


def test_gamma_change_on_attention_model_changes_rate_not_state():
    s = Settings(model="attention", path="static", init_attention="random", **SMALL)
    sim = Simulation(s)
    a = sim.step(10)
    s.gamma = 4.0
    b = sim.step(10)
    # static features: log-odds shrink by exactly e^{−λ·0.2} with the new λ = γ/β
    W_a = np.log(a.attention) - np.log(a.softmax)
    W_b = np.log(b.attention) - np.log(b.softmax)
    np.testing.assert_allclose(en.oscillation(W_b), np.exp(-4.0 * 0.2) * en.oscillation(W_a),
                               rtol=1e-9)
    np.testing.assert_array_equal(b.features, a.features)


# --- given initial state ----------------------------------------------------------------------
def test_given_initial_state_is_used():
    rng = np.random.default_rng(0)
    X, P = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    A = en.rowsoftmax(rng.standard_normal((4, 4)))
    sim = Simulation(Settings(model="canonical", **SMALL), features=X, momenta=P, attention=A)
    f = sim.frame()
    np.testing.assert_allclose(f.features, X, atol=0)
    np.testing.assert_allclose(f.momenta, P, atol=0)
    np.testing.assert_allclose(f.attention, A, atol=1e-15)


@pytest.mark.parametrize("kw, words", [
    ({"attention": np.array([[1.0, 0.0, 0.0, 0.0]] * 4)}, ["attention", "positive"]),
    ({"attention": np.full((4, 4), -0.25)}, ["attention", "positive"]),
    ({"attention": np.full((4, 4), 0.3)}, ["attention", "sum to 1"]),
    ({"attention": np.full((3, 3), 1 / 3)}, ["attention", "shape"]),
    ({"features": np.zeros((4, 2))}, ["features", "shape"]),
    ({"features": np.full((4, 3), np.nan)}, ["features", "finite"]),
    ({"momenta": np.zeros((5, 3))}, ["momenta", "shape"]),
    ({"features": "abc"}, ["features"]),
])
def test_bad_initial_state_is_refused_clearly(kw, words):
    with pytest.raises(ValueError) as info:
        Simulation(Settings(model="canonical", **SMALL), **kw)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# -- deferred bound: the canonical fast path is the scheme's one code path ------------
# The canonical stepper leaves dS/dt and the bound B of its steps pending and fills them
# in for a batch of steps at once (``TrackedEtdVerlet.finish``); these checks pin that to
# the step-by-step update, for every chunking and on overflow.


def _stepped(settings: Settings, n: int):
    """The canonical stepper, and its state and carry after ``n`` steps left pending."""
    sim = Simulation(settings)
    stepper = TrackedEtdVerlet(sim.problem)
    state, carry = sim.state, stepper.start(sim.state)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for _ in range(n):
            state, carry = stepper.step(state, carry, settings.dt)
    return stepper, state, carry


_REGIMES = {"stiff": {"gamma": 1000.0, "beta": 1.0}, "non-stiff": {"gamma": 1.0, "beta": 1.0}}


def _canonical(regime: str) -> Settings:
    return Settings(model="canonical", n_tokens=8, dim=4, **_REGIMES[regime])


@pytest.mark.parametrize("regime", list(_REGIMES))
@pytest.mark.parametrize("mass", [1.0, 1.5])
def test_deferred_bound_matches_step_by_step(regime, mass):
    settings = _canonical(regime).copy(dt=0.02, mass=mass, init_momentum="random")
    # batched: nine steps pending, finished at once; stepwise: finished after each step
    stepper, batched, carry = _stepped(settings, 9)
    assert batched.B is None and carry.pending is not None
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        batched, carry = stepper.finish(batched, carry)
        sim = Simulation(settings)
        one = TrackedEtdVerlet(sim.problem)
        stepwise, c1 = sim.state, one.start(sim.state)
        for _ in range(9):
            stepwise, c1 = one.finish(*one.step(stepwise, c1, settings.dt))
    for name in ("X", "P", "Z", "A", "S_dot", "B"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(stepwise, name))
    np.testing.assert_array_equal(carry.osc_S_dot, c1.osc_S_dot)
    assert carry.pending is None
    # any chunking of advance gives the same state, bit for bit
    one, many = Simulation(settings), Simulation(settings)
    one.advance(150)
    for n in (1, 2, 63, 64, 20):
        many.advance(n)
    for name in ("X", "P", "Z", "A", "S", "S_dot", "B"):
        np.testing.assert_array_equal(getattr(one.state, name), getattr(many.state, name))
    assert one.state.dissipated == many.state.dissipated


def test_deferred_overflow_stops_at_the_step():
    settings = _canonical("stiff").copy(dt=0.02)
    stepper, state, carry = _stepped(settings, 6)
    pending = carry.pending
    states = list(pending.states)
    states[3] = replace(states[3], P=np.full_like(states[3].P, 1e200))
    XMs = list(pending.XMs)
    XMs[3] = np.full_like(XMs[3], 1e200)  # X M Pᵀ overflows in dS/dt
    carry = replace(carry, pending=replace(pending, states=tuple(states), XMs=tuple(XMs)))
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # as in advance
        with pytest.raises(DeferredOverflow) as info:
            stepper.finish(state, carry)
    err = info.value
    assert err.t == states[3].t and err.state.t == states[2].t
    np.testing.assert_array_equal(err.state.X, states[2].X)
    assert err.state.B is not None and err.state.S_dot is not None


def test_settings_count_value_changes_and_a_run_takes_them_in():
    """``Settings.changes`` moves on a changed value only; a Simulation that advanced with
    nothing changed still takes a later change in (β here: the same as a fresh run
    continued from that state with the new β)."""
    s = Settings(model="canonical", n_tokens=5, dim=3)
    count = s.changes
    s.beta = s.beta
    assert s.changes == count
    s.beta = 2.0
    assert s.changes > count
    sim = Simulation(s)
    sim.advance(3)
    sim.advance(2)  # nothing changed: the settings are not reread
    s.gamma = 7.0
    sim.advance(1)
    assert sim.problem.gamma == 7.0 and sim.problem.beta == 2.0


def test_cotangent_lift_next_half_relaxation_follows_dt():
    """The cotangent lift computes the next step's first half relaxation ahead, for the
    same dt; after a dt change it relaxes afresh: the run equals one that never keeps
    that relaxation (to rounding), before and after the change."""
    s = Settings(model="cotangent_lift", n_tokens=6, dim=3, init_momentum="random")
    sim = Simulation(s)
    stepper = Strang(sim.problem)
    ahead = afresh = sim.state
    c_ahead, c_afresh = stepper.start(ahead), stepper.start(afresh)
    h = s.dt
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for k in range(12):
            if k == 6:
                h = 0.025
            ahead, c_ahead = stepper.step(ahead, c_ahead, h)
            afresh, c_afresh = stepper.step(afresh, replace(c_afresh, half=None), h)
            for a, b in ((ahead.X, afresh.X), (ahead.A, afresh.A)):
                np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
            assert ahead.dissipated == pytest.approx(afresh.dissipated, rel=1e-10)
    # and the mutation that ignores dt would be seen: a kept half of another dt differs
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        stale, _ = stepper.step(ahead, replace(c_ahead, half=(0.01,) + c_ahead.half[1:]), 0.01)
        fresh, _ = stepper.step(ahead, replace(c_ahead, half=None), 0.01)
    assert not np.allclose(stale.A, fresh.A, rtol=1e-11, atol=1e-13)
