"""A run asked for some diagnostics (``simulate(..., diagnostics=("kl",))``,
``simulate_batch``, ``Simulation.frame(names)``) computes only those, and each is
bit-identical to the full run's (``np.array_equal``): every model, every diagnostic alone
and the sets a sweep's metrics read; and a sweep asks for exactly what its metrics read.
"""

import itertools

import numpy as np
import pytest
from helpers import assert_same_states

from dynamics import Settings, Simulation, models, simulate
from dynamics.batch import simulate_batch
from dynamics.diagnostics import wanted
from dynamics.sweeps import metrics as sweep_metrics
from dynamics.sweeps import run_batch, run_point
from dynamics.sweeps.metrics import METRICS, diagnostics_needed, trajectory_metrics

T_END = 0.2

#: Settings that reach the branches of ``part_one`` (effective scores, paths, momenta).
VARIANTS = {"attention": {"path": "oscillation"},
            "canonical": {"init_momentum": "random", "init_attention": "random"},
            "value_matching": {"init_momentum": "random"},
            "cotangent_lift": {"init_momentum": "random"}}


def _settings(model):
    return Settings(model=model, n_tokens=5, dim=3, **VARIANTS.get(model, {}))


def _assert_subset(part, full, asked):
    """``part`` holds ``t`` and the diagnostics of ``asked`` that ``full`` has, in
    ``full``'s order, each equal to ``full``'s bit for bit; states equal."""
    expected = [k for k in full.diagnostics if k == "t" or k in asked]
    assert list(part.diagnostics) == expected
    for k in expected:
        assert np.array_equal(part.diagnostics[k], full.diagnostics[k], equal_nan=True), k
    assert_same_states(part, full)
    assert (part.status, part.message) == (full.status, full.message)


def _metric_sets():
    part_one = [m.name for m in METRICS.values() if m.part == 1]
    return [diagnostics_needed(c) for r in (1, 2) for c in itertools.combinations(part_one, r)]


@pytest.mark.parametrize("model", models.names())
def test_each_diagnostic_alone_equals_the_full_runs(model):
    s = _settings(model)
    full = simulate(s, T_END)
    sets = [(name,) for name in full.diagnostics] + _metric_sets() + [(), ("no_such",)]
    for asked in dict.fromkeys(sets):
        _assert_subset(simulate(s, T_END, diagnostics=asked), full, asked)


@pytest.mark.parametrize("model", models.names(part=1))
def test_a_frame_skips_the_arrays_not_asked_for(model):
    sim = Simulation(_settings(model))
    sim.advance(7)
    full, kl = sim.frame(), sim.frame(frozenset({"t", "kl"}), arrays=False)
    assert list(kl.diagnostics) == ["t", "kl"]
    assert kl.diagnostics["kl"] == full.diagnostics["kl"]
    assert (kl.softmax, kl.target, kl.kl_rows) == (None, None, None)
    assert np.array_equal(kl.attention, full.attention)
    some = sim.frame(frozenset({"t", "kl"}))  # with the arrays: the full frame's
    for name in ("softmax", "target", "kl_rows"):
        assert np.array_equal(getattr(some, name), getattr(full, name)), name


def test_every_head_of_a_real_layer_too():
    s = Settings(model="canonical", weights="minilm", heads="all", sentence=0, layer=2)
    full = simulate(s, 0.05)
    for asked in [("kl",), ("kl", "kl_bound", "energy_residual"), ()]:
        _assert_subset(simulate(s, 0.05, diagnostics=asked), full, asked)


def test_batched_runs_with_some_diagnostics_equal_the_full_runs():
    runs = [Settings(model="canonical", n_tokens=6, dim=3, beta=b, gamma=g, seed=k,
                     init_momentum="random")
            for k, (b, g) in enumerate([(0.5, 0.3), (2.0, 1.0), (1.0, 0.2), (0.1, 100.0)])]
    full = simulate_batch(runs, T_END)
    for asked in [("kl",), ("kl", "kl_bound"), ("dissipated", "energy_residual"), ()]:
        part = simulate_batch(runs, T_END, diagnostics=asked)
        for p, f, s in zip(part, full, runs, strict=True):
            _assert_subset(p, f, asked)
            _assert_subset(simulate(s, T_END, diagnostics=asked), f, asked)
        if not asked:  # as simulate(diagnostics=False)
            assert all(list(p.diagnostics) == ["t"] for p in part)


@pytest.mark.parametrize("N, d, n_runs", [(8, 4, 16), (40, 6, 3)])
def test_the_lag_computed_on_a_batchs_stacks_equals_each_run_alone(N, d, n_runs):
    """``kl``, ``kl_bound``, ``dissipated``, ``work`` come from the batch's stacks
    (:mod:`dynamics.batch_diagnostics`): bit-identical to each run's own, varied runs,
    one of which stops part-way."""
    rng = np.random.default_rng(3)
    runs = [Settings(model="canonical", n_tokens=N, dim=d, seed=int(rng.integers(1000)),
                     beta=float(rng.choice([0.3, 1.0, 3.0])),
                     gamma=float(rng.uniform(0.05, 1.2)),
                     mass=float(rng.choice([1.0, 2.0])),
                     confinement=float(rng.choice([0.0, 2.0])),
                     init_attention=str(rng.choice(["uniform", "random", "softmax"])),
                     init_momentum=str(rng.choice(["zero", "random"])))
            for _ in range(n_runs)]
    runs[1] = Settings(model="canonical", n_tokens=N, dim=d, seed=0, gamma=0.5,
                       init_momentum="random", confinement=0.0, norm_limit=1.2 * float(
                           np.linalg.norm(Simulation(seed=0, n_tokens=N, dim=d).state.X)))
    asked = ("kl", "kl_bound", "dissipated", "work")
    batched = simulate_batch(runs, 1.0, 3, diagnostics=asked)
    assert batched[1].status == "diverged" and batched[1].diverged_at < 1.0
    for s, run in zip(runs, batched, strict=True):
        _assert_subset(run, simulate(s, 1.0, 3), asked)


def test_diagnostics_must_be_a_bool_or_a_collection_of_names():
    assert wanted(True) is None
    assert wanted(False) == {"t"} == wanted(())
    assert wanted(["kl"]) == {"t", "kl"}
    for bad in ("kl", 3, [1]):
        with pytest.raises(ValueError, match="diagnostic"):
            simulate(Settings(), 0.05, diagnostics=bad)


@pytest.mark.parametrize("model", ["canonical", "value_matching", "reduced"])
def test_each_metric_reads_only_what_it_needs(model):
    """A metric computed from a run with only its ``needs`` equals the full run's."""
    s = _settings(model)
    full = simulate(s, T_END)
    for name, metric in METRICS.items():
        if metric.part == 2:
            continue
        part = simulate(s, T_END, diagnostics=metric.needs)
        got, expected = (trajectory_metrics(t, [name])[name] for t in (part, full))
        assert np.array_equal(got, expected, equal_nan=True), name
    assert METRICS["lag_amplitude"].states and not METRICS["kl_mean"].states


def test_a_sweep_asks_for_the_union_of_its_metrics_needs(monkeypatch):
    import dynamics.batch
    import dynamics.sweeps.points as points

    asked = []
    real, real_batch = points.simulate, dynamics.batch.simulate_batch
    monkeypatch.setattr(points, "simulate", lambda *a, **k: asked.append(k["diagnostics"])
                        or real(*a, **k))
    monkeypatch.setattr(dynamics.batch, "simulate_batch",
                        lambda runs, *a: asked.append(a[2]) or real_batch(runs, *a))
    names = ["kl_mean", "dissipated", "kl_ratio_max", "diverged_at"]
    assert diagnostics_needed(names) == ("kl", "dissipated", "kl_bound")
    base = Settings(model="canonical", n_tokens=4, dim=2).values()
    run_point(base, T_END, names)
    run_batch([((k,), {**base, "beta": b}) for k, b in enumerate((0.5, 1.0))], T_END, names)
    assert asked == [("kl", "dissipated", "kl_bound")] * 2
    assert sweep_metrics.diagnostics_needed(["t_final", "lag_amplitude"]) == ()
