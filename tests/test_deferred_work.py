"""Work a stepper defers or keeps between steps, pinned to the step-by-step result: the
canonical model's batched tracking bound, and the cotangent lift's half relaxation kept
for the next step."""

from dataclasses import replace

import numpy as np
import pytest

from dynamics import Settings, Simulation
from dynamics.steppers import DeferredOverflow, Strang, TrackedEtdVerlet

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
