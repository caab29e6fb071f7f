"""Stiff runs stepped together (``StiffBatch``, issue #38): each equal to ``simulate`` alone.

Runs of the canonical model with ``λh = γ dt/β`` above 0.05 step on the stiff branch of
their stepper: tracking steps, steps that take the transient's mean, and graded steps in
sub-steps whose sizes depend on each run's ``λ`` (``0.25/λ``, doubling, capped at
``h/32`` on a start and ``h/8`` in its chain). The batch takes the first two kinds on its
stacks, and the graded ones in sub-steps of each run's own sizes; every recorded array and
diagnostic is compared with ``np.array_equal`` against ``simulate`` of that run alone.
"""

import numpy as np
import pytest
from helpers import assert_same_runs

from dynamics import Settings, simulate
from dynamics.batch import StiffBatch, batchable, simulate_batch, stiff
from dynamics.steppers.grading import GRADED_FIRST, GRADED_SUBSTEPS, substeps
from dynamics.sweeps import run_batch, run_point

#: (β, γ) with λh = γ dt/β = 0.06 (never graded), 0.2, 0.3, 1 (graded in sub-steps of
#: h/32 on a start, h/8 in its chain, for as many steps as each run's transient decays),
#: 10, 25 and 100 (graded from a first sub-step of 0.25/λ, doubling), at dt = 0.01.
_STIFF = [(1.0, 6.0), (0.5, 10.0), (2.0, 200.0), (0.3, 9.0), (0.2, 500.0), (0.1, 100.0),
          (0.05, 500.0)]


def _stiff_runs(N=8, d=4, dt=0.01):
    rng = np.random.default_rng(11)
    return [Settings(model="canonical", n_tokens=N, dim=d, dt=dt, beta=beta, gamma=gamma,
                     seed=int(rng.integers(1000)), mass=float(rng.choice([1.0, 2.0])),
                     confinement=float(rng.choice([0.0, 2.0])),
                     init_attention=str(rng.choice(["uniform", "random", "softmax"])),
                     init_momentum=str(rng.choice(["zero", "random"])))
            for beta, gamma in _STIFF]


def test_the_runs_graded_sub_steps_differ():
    """The precondition of the tests below: the runs are stiff, batched, and those
    graded take sub-steps of different sizes (each run keeps its own sequence)."""
    runs = _stiff_runs()
    assert all(batchable(s) and stiff(s) for s in runs)
    sizes = {tuple(substeps(s.dt, GRADED_FIRST * s.beta / s.gamma, s.dt / GRADED_SUBSTEPS))
             for s in runs if s.gamma / s.beta * s.dt >= 0.1}
    assert len(sizes) >= 4


@pytest.mark.parametrize("diagnostics", [True, ("kl",), ("energy_residual",)])
def test_stiff_batch_equals_each_run_alone(diagnostics):
    runs = _stiff_runs()
    batch = StiffBatch(runs)
    names = None if diagnostics is True else {"t", *diagnostics}
    trajectories = batch.run(1.0, 7, names)
    # graded steps (their sub-steps of each run's sizes) on the stacks too
    assert batch.graded_steps > len(runs) and batch.alone_steps == 0
    for s, traj in zip(runs, trajectories, strict=True):
        if names is not None and names <= {"t"}:
            continue
        assert_same_runs(traj, simulate(s, 1.0, every=7, diagnostics=diagnostics))


def test_stiff_and_plain_runs_of_one_batch_equal_each_run_alone():
    runs = _stiff_runs()[:4] + [Settings(model="canonical", beta=2.0, gamma=1.0, seed=4),
                                Settings(model="canonical", beta=1.0, gamma=3.0, seed=5)]
    for s, traj in zip(runs, simulate_batch(runs, 0.6, 5, ("kl",)), strict=True):
        assert_same_runs(traj, simulate(s, 0.6, 5, diagnostics=("kl",)))
    reversed_ = simulate_batch(runs[::-1], 0.6, 5, ("kl",))[::-1]
    for a, b in zip(simulate_batch(runs, 0.6, 5, ("kl",)), reversed_, strict=True):
        assert_same_runs(a, b)


def test_a_stiff_run_that_diverges_stops_alone_and_the_others_go_on():
    runs = _stiff_runs(N=6, d=3, dt=0.02)[:4]
    # no confinement and a strong β: this run's features grow past its norm_limit
    runs[1] = runs[1].copy(confinement=0.0, beta=20.0, gamma=200.0, norm_limit=20.0,
                           init_momentum="random")
    assert stiff(runs[1])
    batched = simulate_batch(runs, 6.0, 10)
    alone = [simulate(s, 6.0, every=10) for s in runs]
    assert alone[1].status == "diverged", "the test needs a diverging run"
    assert sum(t.status == "running" for t in alone) >= 2
    for a, b in zip(batched, alone, strict=True):
        assert_same_runs(a, b)


def test_large_stiff_runs_where_a_run_uses_blas_axpy_are_bit_identical_too():
    runs = _stiff_runs(N=64, d=4)[1:4]  # N² = 4096: the logit step's axpy calls BLAS
    for s, traj in zip(runs, simulate_batch(runs, 0.05, 5), strict=True):
        assert_same_runs(traj, simulate(s, 0.05, every=5))


def test_a_sweeps_stiff_points_equal_plain_runs():
    """``run_batch`` (a sweep's task) steps its stiff points together: each metric equals
    ``run_point``'s, a plain ``simulate`` at that point."""
    points = [((k,), {**Settings(model="canonical").values(), "beta": b, "gamma": g})
              for k, (b, g) in enumerate(_STIFF)]
    metrics = ["kl_mean", "energy_residual_max"]
    for (index, result), (_, values) in zip(run_batch(points, 0.5, metrics), points,
                                            strict=True):
        assert result == run_point(values, 0.5, metrics), index


def test_runs_that_break_their_energy_law_stop_where_it_last_held():
    """The law watch of a batch (its terms on the stacks) stops a run whose energy law
    broke where its own watch stops it, with its message; the others go on. At dt = 0.2
    the plain runs and some stiff ones break it."""
    values = [(1.0, 30.0, 1), (3.0, 30.0, 2), (3.0, 30.0, 1), (8.0, 30.0, 1), (1.0, 3.0, 1),
              (3.0, 0.3, 1), (8.0, 0.3, 2), (1.0, 0.2, 2)]
    runs = [Settings(model="canonical", n_tokens=6, dim=3, dt=0.2, beta=b, gamma=g, seed=seed,
                     init_momentum="random") for b, g, seed in values]
    alone = [simulate(s, 4.0, every=3) for s in runs]
    broke = ["energy law" in t.message for t in alone]
    assert not all(broke), "the test needs runs that go on"
    assert {stiff(s) for s, b in zip(runs, broke, strict=True) if b} == {True, False}, (
        "the test needs plain and stiff runs that break the law")
    for a, b in zip(simulate_batch(runs, 4.0, 3), alone, strict=True):
        assert_same_runs(a, b)
