"""Graded stiff steps: when a stiff step's fast transient is taken in sub-steps that
resolve it, and their sizes (STIFF.md, "Graded starts").

A *start* (:func:`fresh`) whose transient ``W₀`` (:func:`~.transient.lagged_start`) is
large, and the *chain* of steps after it while that transient still decays
(:func:`graded_on`), are taken in sub-steps (:func:`substeps`) by
:class:`~dynamics.steppers.etd_heun.EtdHeun` and
:class:`~dynamics.steppers.etd_verlet.EtdVerlet`.
"""

from __future__ import annotations

import math

#: Fast transients on stiff steps (``λh`` above ``STIFF_LAMBDA_H``) are taken in
#: sub-steps (:func:`substeps`), the first of ``GRADED_FIRST`` times the time of their decay
#: (``1/λ``; ``1/(λ + gain)`` with value matching's feedback),
#: each next twice as long up to ``h / GRADED_SUBSTEPS``. Without that cap the sub-steps
#: where ``λδ ~ 1`` have a size fixed by ``1/λ``, not ``h``, and their error of ∫D stays as
#: ``h`` falls (issue #12, ``tests/stiff_reference.py``, dt = 0.01 … 0.00125 at λh = 100:
#: 5.4e-7, 5.0e-7, 4.9e-7, 4.9e-7 relative; capped at h/32, 5.0e-7, 4.1e-7, 1.6e-7,
#: 1.8e-8). Every sub-step takes the stiff branch, whatever its ``λδ``: by the trapezoidal
#: rule, ∫D of a transient decaying like ``e^{−2λt}`` is off by ``(2λδ)²/12`` per sub-step
#: (λh = 10: 9.8e-4 at dt = 0.00125 with h/32; by the logarithmic mean of the two rates,
#: exact for one exponential, 3.9e-5). The order fitted at λh = 100 depends on the cap, as
#: the first step's error meets that of the rest of the run (``tests/stiff_reference.py``):
#: 0.80, 1.88, 2.10, 2.25, 4.43, 2.38, 2.06, 1.31 with 16, 24, 28, 32, 40, 48, 64, 128
#: sub-steps; λh = 1 stays at 1.97. Graded from λh = 0.25 up only, λh = 1 took
#: dt = 0.00125 whole (λh = 0.125) and erred by 2.5e-6 there, more than at dt = 0.0025
#: (1.1e-6).
GRADED_FIRST = 0.25
GRADED_SUBSTEPS = 32
#: A step is graded when its transient is a distant start: some row of ``W₀`` (logits minus their
#: lagged target) oscillates by more than ``GRADED_OSC``. While attention tracks a target
#: that accelerates, ``W₀`` is ``β d²Ŝ/dt² (1/λ² + h/(2λ))`` to leading order (0.05-0.08
#: at λh = 1.25 in the order test): graded, those steps took sub-steps of a size fixed by
#: ``1/λ``, not by ``h``, and the error fell like ``h^1.2`` (features 8.9e-4 … 7.8e-5 for
#: ``h`` = 1/8 … 1/64 at γ = 20); taken whole, like ``h²`` (8.3e-3 … 1.3e-4).
GRADED_OSC = 0.5
#: A step after a graded one is graded too while its transient still decays: ``osc(W₀)``
#: below ``e^{−GRADED_DECAY λh}`` times that of the step before (the lag of a tracked
#: target stays, and ends the chain). The rest of a transient taken whole relaxes at the
#: frozen ``λ`` of this module, not at the faster rate the feedback gives (``osc(W₀)``
#: fell like ``e^{−1.08 λt}`` at λh = 10): from ``osc(W₀)`` = 0.28 after the graded first
#: step (dt = 0.0025, λh = 10 at dt = 0.01) that step alone erred by 2.5e-6 in ∫D, the
#: graded first step by 4.8e-7. Graded on, λh = 10 went from 8.0e-7, 3.1e-8, 2.3e-6, 6.6e-7
#: (dt = 0.01 … 0.00125) to 8.1e-7, 4.7e-7, 1.7e-7, 4.9e-8; the chain grades 2, 3, 5, 10
#: steps there, 8 … 57 at λh = 1 (2 … 16 without it).
GRADED_DECAY = 0.5
#: Steps graded from this ``λh`` up (value matching's under a strong feedback from
#: ``etd_verlet.GRADED_LAMBDA_H``): below it a transient decays over ten steps or more,
#: which resolve it (graded, a start's chain took 57 steps of 33 sub-steps at λh = 0.06 in
#: the cotangent lift, 48 in value matching; N = 8, d = 4).
GRADED_MIN_LAMBDA_H = 0.1
#: Sub-steps of the steps that follow a graded start while its transient decays (the
#: chain, :data:`GRADED_DECAY`): ``h / CHAIN_SUBSTEPS`` at most, where the
#: start takes ``h / GRADED_SUBSTEPS``. With 32 the chain cost 4 times more, for the same
#: orders (stiff test, ∫D: λh = 1, 1.98, 2.00, 2.00 with 32 and 2.01, 1.84, 1.97 with 8;
#: λh = 10, 1.95, 2.02, 1.98 and 1.96, 2.15, 2.36); with 4 or 2 the orders broke (λh = 1:
#: 1.19 at dt = 0.00125 with 4). The first 100 steps of a start at N = 256, d = 16 took
#: 7.0 s at λh = 0.1, 1.65 s at 1 and 0.4 s at 100 (1.6, 0.3, 0.2 s ungraded; N = 64:
#: 0.5, 0.13, 0.04 s).
CHAIN_SUBSTEPS = 8


def substeps(h, first, cap):
    """The sizes of a graded step's sub-steps: ``first``, each next twice as long, none
    longer than ``cap``; they sum to ``h`` (no sliver of a last sub-step, nor a last one of
    rounding size)."""
    t, delta = 0.0, first
    while h - t > 1e-12 * h:
        delta = min(delta, cap, h - t)
        if h - t - delta < 1e-3 * delta:
            delta = h - t
        yield delta
        t += delta
        delta *= 2.0


def graded_on(osc_W0, graded_osc, x, start=True) -> bool:
    """Whether a stiff step (``x = λh``) whose transient oscillates by ``osc_W0`` is graded:
    a distant ``start`` (above :data:`GRADED_OSC`), or, after a graded step whose transient
    oscillated by ``graded_osc`` (0: none), a transient still decaying
    (:data:`GRADED_DECAY`)."""
    return (start and osc_W0 > GRADED_OSC) or (
        graded_osc > 0.0 and osc_W0 < graded_osc * math.exp(-GRADED_DECAY * x))


def fresh(carry) -> bool:
    """Whether a step starts a run, or continues it after a setting change of the
    relaxation's target or rate (β, γ, κ): its carry holds no dissipation rate (``D``)
    and is not ``continued`` (after a noise kick, or another setting change). Only such a
    step is a distant start; a lag that stays large while the target outruns the
    relaxation is taken whole (graded on every step where ``osc(W₀)`` passed
    :data:`GRADED_OSC`, the cotangent lift at λh = 0.1 … 1 took 13-22 times the steps'
    cost from t ≈ 4 on)."""
    return carry.D is None and not carry.continued
