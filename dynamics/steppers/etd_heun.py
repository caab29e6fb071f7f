"""Heun's method for ``(X, P)`` with the exact logit step for ``Z`` (the cotangent lift's
stiff steps, ``λh`` above ``STIFF_LAMBDA_H``).

A splitting that relaxes attention towards a frozen target and moves the features with
attention frozen (:class:`~dynamics.steppers.strang.Strang`) drops the lag ``−βŜ̇/λ`` of
attention behind its moving target: as the relaxation stiffens its order falls to 1 (the
features move with the attention of the start's target for the whole step). Here the
logits take the exact step with the target ``βŜ`` moving between both ends, which carries
that lag at any ``λh``:

1. ``k₁ = f(X₀, P₀, A₀)``; predictor ``(X̃, P̃) = (X₀, P₀) + h k₁`` and its target
   ``T̃ = βŜ(X̃, P̃)``; the logits' exact step towards it gives ``Ã``;
2. ``k₂ = f(X̃, P̃, Ã)``; ``(X₁, P₁) = (X₀, P₀) + (h/2)(k₁ + k₂)``;
3. the logits' exact step from ``Z₀`` with the target ``T₁ = βŜ(X₁, P₁)``; on a stiff step
   the target cubic in time, from ``T₀``, ``T₁`` and their rates ``dT/dt`` (the field at
   both ends, at the end with the attention of the linear step): the linear target leaves
   attention lagging by ``O(h T̈/λ)``, first order in ``h`` at a fixed relaxation rate
   (``∫D`` at λh = 10 fell like ``h^1.2`` … ``h^1.5`` while ``λh`` went from 5 to 1.25;
   the attention model's exact step does the same).

``f`` is the field with attention frozen (``problem.frozen_field``), affine in ``A``. The
trapezoidal rule in 2. and for the dissipation is second order while the relaxation is
resolved, and for the slow motion of attention on its lagged target at any ``λh``; the
transient towards that target adds its share (:mod:`.transient`): the rest of the step's
mean attention corrects ``(X₁, P₁)`` with ``f`` at the start — to first order in a small
transient (without it ``H`` fell to order 0.8 at λh = 10 as steps went from one branch to
the other), from the transient's mean for a fast one, whose dissipation then comes from
the free-energy balance along the step's path. A fast transient from a distant start
(:func:`~.grading.graded_on`) is taken in sub-steps that resolve it
(:meth:`EtdHeun.graded`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import energy as en
from ..logits import hermite_logit_step, logit_coefficients, logit_step
from ..state import State
from ..workspace import Workspace
from .base import Stepper
from .exact_logit import STIFF_LAMBDA_H
from .grading import (
    CHAIN_SUBSTEPS,
    GRADED_FIRST,
    GRADED_MIN_LAMBDA_H,
    GRADED_SUBSTEPS,
    fresh,
    graded_on,
    substeps,
)
from .transient import (
    CUBIC_LAMBDA_H,
    SUBSTEP_OSC,
    TRANSIENT_OSC,
    hermite_transient,
    lagged_start,
    path_dissipation,
    tracking_correction,
    tracking_shift,
    tracks,
    transient_mean,
)


@dataclass(frozen=True)
class HeunCarry:
    """The target ``βŜ`` (row maxima 0) and the dissipation rate at the state."""

    target: np.ndarray | None = None
    D: float | None = None
    #: ``osc(W₀)`` of the step before when it was graded, else 0
    graded_osc: float = 0.0
    #: the state is no distant start (see ``VerletCarry.continued``)
    continued: bool = False


class EtdHeun(Stepper):
    """Heun's method with the exact logit step (see the module docstring)."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()

    def start(self, state):
        return HeunCarry()

    def step(self, st, carry, h):
        new, carry1, osc_W0 = self.heun(st, carry, h)
        lam = self.problem.relaxation_rate
        start = fresh(carry)
        if (osc_W0 and lam * h >= GRADED_MIN_LAMBDA_H
                and graded_on(osc_W0, carry.graded_osc, lam * h, start)):
            # a fast transient: taken again in sub-steps that resolve it
            new, carry1 = self.graded(st, carry, h,
                                      GRADED_SUBSTEPS if start else CHAIN_SUBSTEPS)
            carry1 = replace(carry1, graded_osc=osc_W0)
        return new, carry1

    def graded(self, st, carry, h, n_substeps):
        """A stiff step with a fast transient in sub-steps (:func:`~.grading.substeps`,
        none longer than ``h / n_substeps``), each on the stiff branch of :meth:`heun`,
        until one tracks its lagged target (within ``SUBSTEP_OSC``): the rest of the step
        is then taken whole."""
        sub, sub_carry, t = st, replace(carry, graded_osc=0.0), 0.0
        lam = self.problem.relaxation_rate
        for delta in substeps(h, GRADED_FIRST / lam, h / n_substeps):
            sub, sub_carry, osc = self.heun(sub, sub_carry, delta, substep=True)
            t += delta
            if not osc:
                if h - t > 1e-12 * h:
                    sub, sub_carry, _ = self.heun(sub, sub_carry, h - t)
                break
        return replace(sub, t=st.t + h), sub_carry

    def heun(self, st, carry, h, substep=False):
        """One step: the new state, its carry and ``osc(W₀)`` of its transient where it was
        measured (a stiff step that does not track its lagged target, or one after a graded
        step), else 0. A ``substep`` of :meth:`graded` takes the stiff branch whatever its
        ``λh``, and at its end the tracking correction only within ``SUBSTEP_OSC`` (its
        predictor within ``TRANSIENT_OSC``, as a whole step's: it moves the features by
        6e-9 at most)."""
        prob, work = self.problem, self.work
        beta, lam = prob.beta, prob.relaxation_rate
        rate = lam / beta
        coef = logit_coefficients(1.0, lam, h)  # targets are βŜ: the step's "β" is 1
        X0, P0, Z0, A0 = st.X, st.P, st.Z, st.A
        T0 = carry.target if carry.target is not None else prob.target(X0, P0)
        D0 = carry.D if carry.D is not None else rate * en.row_variance(A0, Z0 - T0)
        kx1, kp1 = prob.frozen_field(X0, P0, A0)
        Xp, Pp = X0 + h * kx1, P0 + h * kp1
        Tp = prob.target(Xp, Pp)
        Ap = en.rowsoftmax(logit_step(Z0, T0, Tp, 1.0, lam, h, coef=coef), centred=True)
        x, ell = lam * h, -1.0 / (lam * h)
        stiff = substep or x > STIFF_LAMBDA_H
        transient = False
        A2 = Ap
        if stiff:
            Wp = lagged_start(Z0, T0, Tp, 1.0, ell, work.get("heun.W0", Z0.shape))
            transient = not tracks(Wp, work.get("heun.dev", Z0.shape))
            if not transient:  # the rest of the step's mean attention, to first order in
                # the small transient, folded into k₂ (f is affine in A; taken at the
                # predictor instead of the start, it errs by O(h²) of a term O((λh)² W₀))
                A2 = tracking_shift(A0, Wp, x, work.get("heun.K", Z0.shape))
                A2 *= 2.0
                A2 += Ap
        kx2, kp2 = prob.frozen_field(Xp, Pp, A2)
        X1 = X0 + (0.5 * h) * (kx1 + kx2)
        P1 = P0 + (0.5 * h) * (kp1 + kp2)
        if transient:  # the rest of the step's mean attention, with f at the start
            A_mean, _ = transient_mean(Z0, T0, Tp, A0, Ap, Wp, 1.0, lam, h, work, "heun")
            dx, dp = prob.frozen_field(X0, P0, A0 + (A_mean - 0.5 * (A0 + Ap)))
            X1 += h * (dx - kx1)
            P1 += h * (dp - kp1)
        T1 = prob.target(X1, P1)
        Z1 = logit_step(Z0, T0, T1, 1.0, lam, h, coef=coef)
        A1 = en.rowsoftmax(Z1, centred=True)
        cubic = stiff and x > CUBIC_LAMBDA_H
        if cubic:  # the target cubic in time: its rates at both ends (at the end with the
            # attention of the linear step, which errs by O(h T̈/λ): through b₁ = O(1/λ) …)
            T0_dot = prob.target_rate(X0, P0, kx1, kp1)
            T1_dot = prob.target_rate(X1, P1, *prob.frozen_field(X1, P1, A1))
            Z1 = hermite_logit_step(Z0, T0, T1, T0_dot, T1_dot, 1.0, lam, h)
            A1 = en.rowsoftmax(Z1, centred=True)
        D1 = rate * en.row_variance(A1, Z1 - T1)
        dissipated = 0.5 * h * (D0 + D1)
        osc_W0 = 0.0
        if stiff:
            W0 = lagged_start(Z0, T0, T1, 1.0, ell, work.get("heun.W0", Z0.shape))
            dT = T1 - T0
            W = W0
            if cubic:
                W = hermite_transient(W0, dT, T0_dot, T1_dot, 1.0, lam, h,
                                      work.get("heun.Wt", Z0.shape))
            small = SUBSTEP_OSC if substep else TRANSIENT_OSC
            tracked = tracks(W, work.get("heun.dev", Z0.shape), small)
            if carry.graded_osc or not tracked:  # what grading reads
                osc_W0 = float(en.oscillation(W0).max())
            if tracked:
                tr = tracking_correction(A0, W, dT, x, rate, ell, work)
                dissipated += h * tr.mean_D
            else:
                A_mean, _ = transient_mean(Z0, T0, T1, A0, A1, W0, 1.0, lam, h, work, "heun")
                dissipated = path_dissipation(Z0, T0, A0, Z1, T1, A1, A_mean, 1.0) / beta
        new = State(t=st.t + h, X=X1, P=P1, Z=Z1, A=A1, S=None, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated + dissipated, work=st.work)
        return new, HeunCarry(target=T1, D=D1), osc_W0

