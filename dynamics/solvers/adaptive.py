"""Accuracy on request: steps whose size an error estimate controls (``simulate(rtol=...)``,
:func:`~dynamics.trajectory.simulate_adaptive` chooses the stepper).

A canonical run whose relaxation is not stiff (``λ = γ/β`` at most
:data:`~dynamics.solvers.explicit.EXPLICIT_RATE`) is stepped by DOP853 on the whole system
(:mod:`dynamics.solvers.explicit`: an explicit pair of order 8 is the right tool there, and one of
our symmetric steps costs as much as a field evaluation at small N). A stiff one
(single-head canonical, ``λ`` above that) is stepped by the exponential Runge–Kutta
method of stiff order 4 of :mod:`dynamics.solvers.exprk` on the same fused field. Every other
run takes the steps below.

Two kinds of step, each with its error estimate ``err``, measured as ``solve_ivp``
measures its own: the root mean square over features, momenta and attention of
``difference / (atol + rtol · max(|y₀|, |y₁|))``.

* Where the model's step ``Φ`` is symmetric and every sub-step stays on its plain branch
  (:func:`~dynamics.steppers.composition.composable`): the fourth-order composition
  ``Ψ_H`` (``suzuki4``, five sub-steps, :mod:`dynamics.steppers.composition`) is kept,
  and one plain step ``Φ_H`` from the same state estimates the error (an embedded pair:
  ``Ψ_H − Φ_H`` is the local error of ``Φ_H``, of order ``H³``, an upper estimate of
  that of ``Ψ_H``, as RK45 controls its fifth-order result with a fourth-order estimate).
  The runs are therefore more accurate than ``rtol`` asks (the tests measure how much).
* Elsewhere (stiff relaxation, non-symmetric steps, Part II): step doubling of the
  model's own step of order ``p`` — one step ``Φ_H`` and two halves, which are kept;
  they differ by ``2^p − 1`` times the error of the halves (Richardson). For the
  canonical model the kept state is extrapolated, ``y_½ + (y_½ − y_H)/(2^p − 1)`` in
  features, momenta, logits and dissipated energy (attention, scores and ``dS/dt``
  recomputed there): measured on the stiff benchmark run (γ/β = 1000), 10 to 40 times
  more accurate for the same steps, at about 1.5 times their cost.

A step with ``err ≤ 1`` is kept, and the next size is
``H · min(5, max(0.2, 0.9 err^{−1/(q+1)}))`` (``q = 2`` for the embedded pair, ``p``
otherwise; the standard controller, Hairer, Nørsett & Wanner I, §II.4; no growth right
after a rejection); a rejected step is tried again smaller. Sizes are rounded down to
powers of ``2^{1/8}`` so that consecutive steps share theirs (and the constants a stepper
keeps for one size). The composition is preferred; a step longer than it may take
(:func:`~dynamics.steppers.composition.largest_step`, about ``0.12/λ``) is taken by step
doubling when the controller asks for one at least twice as long.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .. import energy as en
from ..logits import centre_rows, score_rate
from ..steppers.base import Stepper, TooStiff
from ..steppers.composition import (
    SCHEMES,
    Composition,
    composable,
    compose,
    largest_step,
    settle,
)
from ..steppers.etd_verlet import EtdVerlet
from ..steppers.exact_logit import ExactLogit
from ..steppers.tracked_verlet import TrackedEtdVerlet
from ..steppers.verlet_carry import VerletCarry

#: The composition used where the model's step is symmetric.
SCHEME = "suzuki4"
#: Step-size factors of the controller: safety, smallest and largest change.
SAFETY, SHRINK, GROW = 0.9, 0.2, 5.0
#: Steps are rounded down to powers of 2^(1/ROUNDING).
ROUNDING = 8
#: Extrapolate step-doubled canonical steps.
EXTRAPOLATE = True
#: Most kept steps whose deferred work waits while the caller reports no state.
HELD = 32
#: Smallest step, relative to the span of the run, before a failing step is a divergence.
SMALLEST = 1e-12


class FreshArrays:
    """An :class:`~dynamics.workspace.Owned` that never reuses an array: a step that is
    tried again from the same state must not overwrite that state's arrays."""

    def take(self, name, shape, busy=()):
        return np.empty(shape)


def _fresh(stepper):
    """``stepper`` with fresh arrays for every new state (and so its sub-steppers)."""
    if hasattr(stepper, "owned"):
        stepper.owned = FreshArrays()
    for sub in getattr(stepper, "_roles", {}).values():
        _fresh(sub)
    for sub in (getattr(stepper, "stiff", None),):
        if isinstance(sub, Stepper):
            _fresh(sub)
    return stepper


def _compare(y0, big, half, rtol, atol) -> float:
    """RMS over X, P and A of ``(half − big) / (atol + rtol · max(|y₀|, |half|))``."""
    total, count = 0.0, 0
    for name in ("X", "P", "A"):
        a0, b, c = getattr(y0, name), getattr(big, name), getattr(half, name)
        if c is None or b is None or a0 is None:
            continue
        scale = atol + rtol * np.maximum(np.abs(a0), np.abs(c))
        r = (c - b) / scale
        total += float(np.vdot(r, r))
        count += r.size
    return math.sqrt(total / count)


def _round_down(h: float) -> float:
    return 2.0 ** (math.floor(ROUNDING * math.log2(h) + 1e-9) / ROUNDING)


class AdaptiveStepper(Stepper):
    """Steps of the size an error estimate allows (see the module docstring).

    ``step(state, carry, h)`` takes one kept step of at most ``h`` and at most up to
    ``t_end``: ``new_state.t ≤ state.t + h``, less when the error asks for it (a step
    that is too long is tried again shorter inside the call). ``order`` is that of the
    scheme used where it is composed (the local error of a kept step is controlled).
    """

    def __init__(self, problem, base_type, *, rtol: float, atol: float, t_end: float,
                 h0: float, scheme: str = SCHEME):
        super().__init__(problem)
        self.base_type, self.rtol, self.atol, self.t_end = base_type, rtol, atol, t_end
        self.order = SCHEMES[scheme][0] if base_type.order == 2 else base_type.order
        self._coefficients = SCHEMES[scheme][1]
        self._composed = compose(base_type, scheme) if base_type.order == 2 else None
        self._scheme = scheme
        #: proposed step of each scheme (composed: True)
        self._h = {True: _round_down(h0)}
        self._h[False] = self._h[True] / 2.0
        self._after_rejection = False
        #: local extrapolation of the step-doubled steps (canonical model)
        self._extrapolate = (EXTRAPOLATE and issubclass(base_type, TrackedEtdVerlet)
                             and not problem.attention_feedback)
        self._largest = (largest_step(problem, self._coefficients)
                         if issubclass(base_type, (EtdVerlet, ExactLogit)) else math.inf)
        # separate steppers for whole and half steps: each keeps the constants of its size
        self._steppers = {}
        self.accepted = self.rejected = self.composed = 0
        self.hold = False  # the caller reports no state before the next release
        self._held = 0

    def _stepper(self, kind, composed):
        """The stepper of the ``"kept"`` steps (composed or not) or of the ``"check"``
        steps that only estimate the error: these keep no tracking bound (the same step
        without the deferred diagnostics, whose pending work belongs to the kept steps)."""
        key = (kind, composed)
        s = self._steppers.get(key)
        if s is None:
            base = self.base_type
            if kind == "check" and issubclass(base, TrackedEtdVerlet):
                base = EtdVerlet
            s = compose(base, self._scheme)(self.problem) if composed else base(self.problem)
            s = self._steppers[key] = _fresh(s)
        return s

    def start(self, state):
        return self._stepper("kept", False).start(state)

    def _choose(self, span):
        """``(composed, H)`` of the next attempt. The composition wherever the model's
        step is symmetric, at most :func:`~dynamics.steppers.composition.largest_step`
        long; when the controller wants longer steps than that (stiff relaxation) and the
        base step's own proposal is at least twice as long (a composed step with its
        estimate costs six steps, a doubled base step three), the base step."""
        H_base = self._h[False]
        if self._composed is None:
            return False, H_base
        H_comp = self._h[True]
        if H_comp > self._largest:
            if H_base >= 2.0 * self._largest:
                return False, H_base
            H_comp = self._largest
        if composable(self.base_type, self.problem, H_comp, self._coefficients) is None:
            return True, H_comp
        return False, H_base

    def step(self, st, carry, h):
        end = min(st.t + h, self.t_end)
        # a prescribed path's jump ends a step (the stepper steps onto it, then jumps)
        jumps = getattr(getattr(self.problem, "path", None), "jumps", ())
        end = min([end, *(ts for ts in jumps if st.t < ts < end)])
        span = end - st.t
        if not span > 0.0:
            raise ValueError(f"nothing left to step: t = {st.t!r}, t_end = {self.t_end!r}")
        smallest = SMALLEST * max(self.t_end, 1.0)
        while True:
            composed, H = self._choose(span)
            last = H >= span * (1.0 - 1e-12)
            if last:
                H = span
            q = self.base_type.order  # (an attempt may fail before its error is known)
            try:
                if composed:  # Ψ_H kept; Φ_H only estimates the error (an embedded pair)
                    kept = self._stepper("kept", True)
                    y_check, _ = self._stepper("check", False).step(st, carry, H)
                    y2, c2 = kept.step(*settle(kept, st, carry, H), H)
                    err = _compare(st, y_check, y2, self.rtol, self.atol)
                else:  # step doubling: Φ_H estimates the error of Φ_{H/2} ∘ Φ_{H/2}
                    kept = self._stepper("kept", False)
                    y_check, _ = self._stepper("check", False).step(st, carry, H)
                    y1, c1 = kept.step(*settle(kept, st, carry, 0.5 * H), 0.5 * H)
                    y2, c2 = kept.step(y1, c1, 0.5 * H)
                    err = _compare(st, y_check, y2, self.rtol, self.atol) / (2.0**q - 1.0)
                    if err <= 1.0 and self._extrapolate:
                        y2, c2 = self._extrapolated(kept, y_check, y2, c2, q)
            except (FloatingPointError, TooStiff):  # too long a step (a token turned too
                err = math.inf  # far, a feedback solve failed): the controller shortens it
            exponent = -1.0 / (q + 1)
            if err <= 1.0:
                factor = GROW if err == 0.0 else min(GROW, max(SHRINK, SAFETY * err ** exponent))
                if self._after_rejection:
                    factor = min(factor, 1.0)
                self._after_rejection = False
                if not last or factor < 1.0:
                    wanted = max(H * factor, smallest)
                    self._h[composed] = _round_down(wanted)
                    if composed and wanted > self._largest:  # the base step may be cheaper
                        self._h[False] = max(self._h[False], _round_down(wanted) / 2.0)
                self.accepted += 1
                self.composed += composed
                return (_at(y2, end) if last else y2), c2
            self.rejected += 1
            self._after_rejection = True
            if H <= smallest:
                raise FloatingPointError(f"the step fell below {smallest:.3g} at t = {st.t:.6g}")
            shrink = SHRINK if not math.isfinite(err) else max(SHRINK, SAFETY * err ** exponent)
            self._h[composed] = _round_down(max(H * min(shrink, 0.9), smallest))

    def _extrapolated(self, kept, y_check, y2, c2, q):
        """Local Richardson extrapolation of a kept step-doubled canonical step:
        ``y* = y_½ + (y_½ − y_H)/(2^q − 1)`` for the features, momenta, logits and the
        dissipated energy; attention, scores and ``dS/dt`` recomputed there."""
        prob = self.problem
        y2, c2 = kept.finish(y2, c2)  # the tracking bound of the kept halves
        f = 1.0 / (2.0**q - 1.0)
        X = y2.X + f * (y2.X - y_check.X)
        P = y2.P + f * (y2.P - y_check.P)
        Z = centre_rows(y2.Z + f * (y2.Z - y_check.Z))
        S_dot = score_rate(X, P / prob.mass, prob.M)
        new = replace(y2, X=X, P=P, Z=Z, A=en.rowsoftmax(Z, centred=True),
                      S=en.scores(X, prob.M), S_dot=S_dot,
                      dissipated=y2.dissipated + f * (y2.dissipated - y_check.dissipated))
        return new, VerletCarry(osc_S_dot=en.oscillation(S_dot))

    def finish(self, state, carry):
        if self.hold and self._held < HELD:
            self._held += 1
            return state, carry
        self._held = 0
        return self._stepper("kept", False).finish(state, carry)

    def batch(self, n_tokens: int) -> int:
        return 1


def _at(state, t):
    return state if state.t == t else replace(state, t=t)


__all__ = ["AdaptiveStepper", "Composition"]
