"""Graded stiff steps (Theory page: "The Fisher–Rao attention flow"): a fast transient from a
distant start is taken in sub-steps; a lag that stays large while the target outruns the
relaxation is not a start and is taken whole; the sub-step sizes add up to the step."""

import math

import pytest
from helpers import few_examples
from hypothesis import example, given
from hypothesis import strategies as st

from dynamics import Settings, Simulation
from dynamics.steppers import etd_heun, etd_verlet
from dynamics.steppers.grading import GRADED_FIRST, substeps


def _count_graded(monkeypatch):
    graded = []
    for cls in (etd_heun.EtdHeun, etd_verlet.EtdVerlet):
        original = cls.graded
        monkeypatch.setattr(cls, "graded", lambda self, st, *a, _o=original, **k: (
            graded.append(st.t), _o(self, st, *a, **k))[1])
    return graded


@pytest.mark.parametrize("model, values", [
    ("cotangent_lift", {"gamma": 30.0, "confinement": 20.0}),
    ("cotangent_lift", {"gamma": 10.0}),
    ("value_matching", {"gamma": 30.0, "kappa": 1.0}),
    ("canonical", {"gamma": 30.0}),
])
def test_only_a_start_and_its_decay_are_graded(model, values, monkeypatch):
    """The cotangent lift at λh = 0.3 (k = 20) and 0.1 keeps a lag above ``GRADED_OSC``
    from t ≈ 3 on; graded there like a start, 478 and 529 of 1000 steps took 9 to 33
    sub-steps each (about 17 times the steps' cost). Only the start's transient is
    graded now, while it decays. The canonical model (λh = 0.3, from uniform attention)
    grades its distant start too."""
    graded = _count_graded(monkeypatch)
    s = Settings(model=model, n_tokens=8, dim=4, seed=3, dt=0.01, init_momentum="random",
                 **values)
    sim = Simulation(s)
    sim.advance(1000)
    assert sim.status == "running", sim.message
    assert graded and graded[0] == 0.0, "the distant start is graded"
    late = [t for t in graded if t > 1.0]
    assert not late, f"{len(late)} steps graded after t = 1 (first at t = {late[0]:.2f})"


@few_examples(500)
@example(h=0.8359065619005405, rate_h=0.6518962778546106, n=1)  # left 1.1e-16 over
@given(h=st.floats(1e-5, 1.0), rate_h=st.floats(0.05, 1e4),
       n=st.sampled_from([1, 8, 32]))
def test_substeps_add_up_to_the_step(h, rate_h, n):
    """Sizes from ``GRADED_FIRST/rate``, doubling, at most ``h/n``: they sum to ``h`` to
    rounding, none is a sliver below 1e-3 of the one before, and no sub-step of rounding
    size is left over (with a cap of ``h``, 135 of 200,000 cases ended on one of about
    1e-17)."""
    sizes = list(substeps(h, GRADED_FIRST * h / rate_h, h / n))
    assert math.isclose(sum(sizes), h, rel_tol=1e-12)
    assert all(size > 0.0 for size in sizes)
    for before, size in zip(sizes[:-1], sizes[1:], strict=True):
        assert size >= 1e-3 * before
    assert min(sizes) > 1e-12 * h
    assert len(sizes) <= 64 + n


def _lagging_run(monkeypatch):
    """The cotangent lift at γ = 30, k = 20 past t = 5, where its lag stays above
    ``GRADED_OSC``; and a list that records the steps graded from then on."""
    graded = _count_graded(monkeypatch)
    sim = Simulation(Settings(model="cotangent_lift", n_tokens=8, dim=4, seed=3, dt=0.01,
                              gamma=30.0, confinement=20.0, init_momentum="random"))
    sim.advance(500)
    graded.clear()
    return sim, graded


def test_a_stiff_step_after_a_resolved_one_is_no_start(monkeypatch):
    """dt alternating between 0.001 (λh = 0.03: Strang's resolved step) and 0.01 (λh =
    0.3: the stiff step) hands the carry over each time; it took every stiff step for a
    start (10 of 10 graded in 32 sub-steps)."""
    sim, graded = _lagging_run(monkeypatch)
    for k in range(20):
        sim.settings.dt = 0.001 if k % 2 == 0 else 0.01
        sim.advance(1)
    assert sim.status == "running", sim.message
    assert not graded, f"{len(graded)} of 10 stiff steps graded"


def test_a_setting_change_that_leaves_the_target_is_no_start(monkeypatch):
    """Ten nudges of the confinement, five steps apart, each graded a step in 32 sub-steps
    (a slider drag does this at every change); a change of β moves the target and is a
    start (a quench)."""
    sim, graded = _lagging_run(monkeypatch)
    for k in range(10):
        sim.settings.confinement = 20.0 + 0.1 * (k + 1)
        sim.advance(5)
    assert sim.status == "running", sim.message
    assert not graded, f"{len(graded)} of 10 confinement changes graded"
    sim.settings.beta = 3.0
    sim.advance(5)
    assert graded, "the quench of β is graded as a start"
