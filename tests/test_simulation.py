"""The stepping engine (MODEL.md §9, Part III): diagnostics, divergence, validation,
reproducibility and changes between steps."""

import math

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
        if "energy_residual" not in NOT_APPLICABLE.get(model, ()):  # (transformer, sphere)
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
