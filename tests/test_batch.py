"""Many runs at once (``simulate_batch``): bit-identical to each run alone.

Every recorded array and diagnostic of every run is compared with ``np.array_equal``
against ``simulate`` of that run alone, at several batch sizes (1, 3, 16) and orders,
with runs that differ in β, γ, m, k, seed, initial attention and momenta, and runs
that diverge part-way (taken one by one for that step by their engine).
"""

import numpy as np
import pytest
from helpers import assert_same_runs

from dynamics import Settings, simulate
from dynamics.batch import CanonicalBatch, batchable, simulate_batch


def _assert_same(a, b):
    assert_same_runs(a, b)
    assert a.settings == b.settings


def _varied(n, N=8, d=4, dt=0.01):
    rng = np.random.default_rng(7)
    out = []
    for _ in range(n):
        out.append(Settings(
            model="canonical", n_tokens=N, dim=d, dt=dt, seed=int(rng.integers(1000)),
            beta=float(rng.choice([1.0, 0.5, 3.0])), gamma=float(rng.uniform(0.1, 1.2)),
            mass=float(rng.choice([1.0, 2.0])), confinement=float(rng.choice([2.0, 0.0, 5.0])),
            init_attention=str(rng.choice(["uniform", "random", "softmax"])),
            init_momentum=str(rng.choice(["zero", "random"]))))
    return out


@pytest.mark.parametrize("size", [1, 3, 16])
def test_batch_is_bit_identical_to_runs_alone(size):
    runs = _varied(size)
    assert all(batchable(s) for s in runs)  # all stepped together
    batch = simulate_batch(runs, t_end=0.5, every=7)
    for s, traj in zip(runs, batch, strict=True):
        _assert_same(traj, simulate(s, 0.5, every=7))


def test_batch_results_do_not_depend_on_the_batch_or_its_order():
    runs = _varied(12)
    whole = simulate_batch(runs, t_end=0.3, every=5)
    rev = simulate_batch(runs[::-1], t_end=0.3, every=5)[::-1]
    halves = simulate_batch(runs[:5], 0.3, 5) + simulate_batch(runs[5:], 0.3, 5)
    for a, b, c in zip(whole, rev, halves, strict=True):
        _assert_same(a, b)
        _assert_same(a, c)


def test_runs_that_diverge_stop_alone_and_the_others_go_on(monkeypatch):
    runs = _varied(4, N=6, d=3, dt=0.02)
    # no confinement and a strong β: this run's features grow past norm_limit
    runs[1] = runs[1].copy(confinement=0.0, beta=20.0, norm_limit=20.0,
                           init_momentum="random")
    assert all(batchable(s) for s in runs)
    stepped_alone = []
    original = CanonicalBatch.step_alone

    def spy(self):
        stepped_alone.append(self.t)
        return original(self)

    monkeypatch.setattr(CanonicalBatch, "step_alone", spy)
    batch = simulate_batch(runs, t_end=6.0, every=10)
    assert len(stepped_alone) == 1  # one step one by one, the rest together
    alone = [simulate(s, 6.0, every=10) for s in runs]
    assert alone[1].status == "diverged", "the test needs a diverging run"
    assert any(t.status == "running" for t in alone)
    for a, b in zip(batch, alone, strict=True):
        _assert_same(a, b)


def test_other_models_and_noisy_runs_run_one_by_one_with_the_same_results():
    runs = [Settings(model="reduced", n_tokens=5, dim=3),
            Settings(model="canonical", n_tokens=5, dim=3, gamma=100.0),  # λ dt = 1: stiff
            Settings(model="canonical", n_tokens=5, dim=3, logit_noise=0.3),
            Settings(model="canonical", n_tokens=5, dim=3)]
    # the stiff run is stepped with the stiff runs of the batch (tests/test_batch_stiff.py)
    assert [batchable(s) for s in runs] == [False, True, False, True]
    batch = simulate_batch(runs, t_end=0.2, every=4)
    for s, traj in zip(runs, batch, strict=True):
        _assert_same(traj, simulate(s, 0.2, every=4))


def test_real_heads_run_one_by_one_and_keep_their_constant_column():
    """A real head (``weights="minilm"``) pins its constant last feature coordinate;
    the batch's plain step does not pin, so such runs must run alone (a batch of two
    heads had moved that column by 1.7 by t = 1 and changed every diagnostic)."""
    runs = [Settings(model="canonical", weights="minilm", head=h) for h in (0, 1)]
    assert not any(batchable(s) for s in runs)
    for s, traj in zip(runs, simulate_batch(runs, t_end=0.1, every=5), strict=True):
        assert np.array_equal(traj.features[:, :, -1], traj.features[:1, :, -1].repeat(
            len(traj.times), axis=0))
        _assert_same(traj, simulate(s, 0.1, every=5))
    with pytest.raises(ValueError, match="weights='minilm'"):
        CanonicalBatch(runs)


@pytest.mark.parametrize("name, other", [("n_tokens", 5), ("dim", 3), ("dt", 0.02)])
def test_a_batch_must_share_shapes_and_dt(name, other):
    runs = [Settings(model="canonical"), Settings(model="canonical", **{name: other})]
    with pytest.raises(ValueError, match=f"share {name}"):
        simulate_batch(runs, 1.0)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="t_end"):
        simulate_batch([Settings()], t_end=-1.0)
    with pytest.raises(ValueError, match="every"):
        simulate_batch([Settings()], t_end=1.0, every=0)
    assert simulate_batch([], 1.0) == []


def test_large_runs_where_a_run_uses_blas_axpy_are_bit_identical_too():
    runs = _varied(2, N=64, d=4)  # N² = 4096: the logit step's axpy calls BLAS
    batch = simulate_batch(runs, t_end=0.05, every=5)
    for s, traj in zip(runs, batch, strict=True):
        _assert_same(traj, simulate(s, 0.05, every=5))


# -- the tracking bound against its ODE (issue #31) --------------------------------------
#: The batch's runs for the bound: β, γ, m, k and seeds varied, λh from 0.002 to 0.05
#: (the batched, plain steps), attention and momenta random.
_BOUND_RUNS = [
    {"beta": 1.0, "gamma": 1.0, "seed": 3},
    {"beta": 2.0, "gamma": 10.0, "mass": 2.0, "seed": 5},
    {"beta": 0.5, "gamma": 2.5, "confinement": 2.0, "seed": 8},
    {"beta": 5.0, "gamma": 1.0, "mass": 0.5, "seed": 11},
]
#: Relative tolerance of the bound at dt = 0.01 (errors measured 2.9e-5 … 1.1e-4; with the
#: faults of :func:`test_batch_bound_check_sees_a_wrong_bound`, up to 4.9e-2 and 2.8).
BOUND_RTOL = 2e-4


def _bound_errors():
    from stiff_reference import coupled_reference

    runs = [Settings(model="canonical", n_tokens=5, dim=3, dt=0.01, init_attention="random",
                     init_momentum="random", **values) for values in _BOUND_RUNS]
    assert all(batchable(s) for s in runs)
    errors = []
    for s, traj in zip(runs, simulate_batch(runs, t_end=1.0, every=10), strict=True):
        assert traj.status == "running", traj.message
        expected = coupled_reference(s, 1.0)["kl_bound"]
        errors.append(abs(traj.diagnostics["kl_bound"][-1] - expected) / expected)
    return errors


def test_batch_tracking_bound_solves_its_ode():
    """The batch's ``kl_bound = Σ B_i²/8`` against ``dB_i/dt = −λB_i + β osc(dS_i/dt)``,
    ``B_i(0) = osc(W_i(0))``, solved with the readable field by ``solve_ivp``
    (``tests/stiff_reference.py``): the batch's bound was checked only against the
    stepper's copy of the same weights (bit identity), which could be wrong together."""
    errors = _bound_errors()
    print("batch kl_bound relative errors at t = 1:", ", ".join(f"{e:.1e}" for e in errors))
    assert max(errors) <= BOUND_RTOL


@pytest.mark.parametrize("fault", ["plain trapezoid", "mass left out"])
def test_batch_bound_check_sees_a_wrong_bound(fault, monkeypatch):
    """The check above fails on a bound integrated with the plain trapezoid weights
    ``h/2`` (no decay inside the step) or with ``dS/dt`` from the momenta, not the
    velocities (runs with m ≠ 1)."""
    import dynamics.batch_canonical as batch

    if fault == "plain trapezoid":
        monkeypatch.setattr(batch, "exp_trapezoid", lambda lam, h: (0.5 * h, 0.5 * h))
    else:
        init = batch.CanonicalBatch.__init__

        def no_mass(self, settings):
            init(self, settings)
            self.any_mass = False

        monkeypatch.setattr(batch.CanonicalBatch, "__init__", no_mass)
    errors = _bound_errors()
    print(f"{fault}:", ", ".join(f"{e:.1e}" for e in errors))
    assert max(errors) > 10 * BOUND_RTOL


@pytest.mark.parametrize("N, d", [(8, 4), (40, 6)])
def test_the_energy_residual_on_the_stacks_equals_each_run_alone(N, d):
    """``hamiltonian`` and ``energy_residual`` asked alone come from the batch's stacks
    (:mod:`dynamics.batch_diagnostics`, the sweeps' ``energy_residual_max``): bit-identical
    to each run's own, on varied runs (mass, confinement, momenta), one of which diverges
    part-way."""
    runs = _varied(6, N=N, d=d)
    start = simulate(Settings(seed=0, n_tokens=N, dim=d), 0.01).features[0]
    runs[2] = Settings(model="canonical", n_tokens=N, dim=d, dt=0.01, seed=0, gamma=0.5,
                       init_momentum="random", confinement=0.0,
                       norm_limit=1.2 * float(np.linalg.norm(start)))
    for asked in [("energy_residual",), ("hamiltonian", "kl", "energy_residual")]:
        batched = simulate_batch(runs, 1.0, 3, diagnostics=asked)
        assert batched[2].status == "diverged"
        for s, run in zip(runs, batched, strict=True):
            _assert_same(run, simulate(s, 1.0, 3, diagnostics=asked))
            assert list(run.diagnostics) == ["t", *[n for n in ("hamiltonian", "kl",
                                                                  "energy_residual")
                                                    if n in asked]]
