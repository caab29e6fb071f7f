"""Higher-order compositions of a symmetric second-order step (Yoshida, Suzuki).

``Ψ_h = Φ_{c_s h} ∘ … ∘ Φ_{c_1 h}`` with symmetric coefficients summing to 1 raises a
*symmetric* (self-adjoint, ``Φ_{−h} = Φ_h^{−1}``) step of order 2 to order 4 (Yoshida's
triple jump, Suzuki's five-stage fractal) or 6 (Yoshida's seven-stage solution A). The
order-4 conditions hold only for a symmetric base (Hairer, Lubich & Wanner, *Geometric
Numerical Integration*, §II.4 and §V.3): a non-symmetric second-order step composed with
these coefficients gains one order only, from ``Σ c³ = 0`` (measured with ``suzuki4``:
3.1 for the cotangent lift's Strang step, 3.0 for the Transformer flow's Heun step;
``tests/test_adaptive.py``).

Which steps of this package are symmetric (:func:`composable`):

* :class:`~.verlet.Verlet` (reduced model): velocity Verlet, symmetric for every ``h``.
* :class:`~.etd_verlet.EtdVerlet` without attention feedback (canonical model) while the
  relaxation is resolved (every sub-step on the plain branch, :func:`largest_step`):
  kick, drift, kick with the exact logit step for scores linear in time, which is the
  exact flow of ``dZ/dt = γS(t) − λZ`` for that interpolant and so runs backwards onto
  itself. Every composition of order above 2 has a negative coefficient, a backward step
  that *amplifies* the relaxation by ``e^{λ|c h|}``: stiff steps are never composed (and
  the transient correction of a stiff step's kick, from a distant start, is not
  symmetric).
* :class:`~.exact_logit.ExactLogit` (attention on a prescribed path) on the same
  condition, for a path without jumps (a jump shortens a step).

Not symmetric, hence never composed: value matching's step (its explicit prediction of
the attention feedback; composed at γ = 0.3, κ = 0.5 it measured order 4.0 all the same,
but its implicit feedback solve on strong or stiff steps is not symmetric either), the
cotangent lift's Strang splitting (Heun's method inside is not self-adjoint), the
first-order Transformer flow's Heun step, and classical RK4 of Part II (already of
order 4).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .base import Stepper
from .etd_verlet import EtdVerlet
from .exact_logit import STIFF_LAMBDA_H, ExactLogit
from .verlet import Verlet


def _triple_jump(order_below: int) -> tuple:
    """Yoshida's triple jump ``(w₁, w₀, w₁)``: from a symmetric step of order 2k to 2k+2."""
    w1 = 1.0 / (2.0 - 2.0 ** (1.0 / (order_below + 1)))
    return (w1, 1.0 - 2.0 * w1, w1)


def _suzuki() -> tuple:
    """Suzuki's fractal ``(p, p, 1 − 4p, p, p)``, ``p = 1/(4 − 4^{1/3})``: order 4, a
    smaller error constant than the triple jump for five sub-steps instead of three."""
    p = 1.0 / (4.0 - 4.0 ** (1.0 / 3.0))
    return (p, p, 1.0 - 4.0 * p, p, p)


def _yoshida6() -> tuple:
    """Yoshida's order-6 solution A (seven sub-steps)."""
    w1, w2, w3 = -1.17767998417887, 0.235573213359357, 0.784513610477560
    w0 = 1.0 - 2.0 * (w1 + w2 + w3)
    return (w3, w2, w1, w0, w1, w2, w3)


#: Largest ``λ|c h|`` of a backward sub-step (``c < 0``), which multiplies deviations of
#: the logits from their target by ``e^{λ|c h|}`` (at most e here). Forward sub-steps stay
#: on the steppers' plain branch, ``λ c h ≤ STIFF_LAMBDA_H``: a stiff branch corrects the
#: kick for a fast transient, which is not symmetric (measured: the canonical run of the
#: benchmark lost two orders of magnitude of accuracy once its sub-steps crossed it).
COMPOSE_LAMBDA_H = 1.0

#: Composition schemes: name -> (order, coefficients).
SCHEMES = {
    "yoshida4": (4, _triple_jump(2)),
    "suzuki4": (4, _suzuki()),
    "yoshida6": (6, _yoshida6()),
}


def composable(stepper_type, problem, h: float, coefficients) -> str | None:
    """Why a step of ``stepper_type`` on ``problem`` may not be composed with
    ``coefficients`` at step ``h``, or None when it may (the module docstring lists the
    symmetric steps)."""
    if issubclass(stepper_type, Verlet):
        return None
    if issubclass(stepper_type, (EtdVerlet, ExactLogit)):
        if issubclass(stepper_type, EtdVerlet) and problem.attention_feedback:
            return "value matching's step (explicit prediction of the feedback) is not symmetric"
        path = getattr(problem, "path", None)
        if path is not None and path.jumps:
            return "a path with a jump shortens steps"
        if abs(h) > largest_step(problem, coefficients):
            return ("stiff relaxation (a sub-step beyond largest_step): a stiff sub-step "
                    "is not symmetric, a backward one amplifies the relaxation")
        return None
    return f"{stepper_type.__name__} is not a symmetric step"


def largest_step(problem, coefficients) -> float:
    """The largest ``h`` whose forward sub-steps have ``λ c h ≤ STIFF_LAMBDA_H`` and
    backward ones ``λ|c h| ≤ COMPOSE_LAMBDA_H`` (a problem that relaxes its logits at the
    rate ``problem.relaxation_rate = λ``)."""
    lam = problem.relaxation_rate
    if lam <= 0.0:
        return math.inf
    return min(STIFF_LAMBDA_H / (lam * max(coefficients)),
               COMPOSE_LAMBDA_H / (lam * -min(coefficients)))


def compose(base_type, scheme: str = "yoshida4"):
    """The :class:`Composition` class of ``base_type`` (a stepper class of order 2) with
    the coefficients of ``SCHEMES[scheme]``; its ``order`` is the scheme's."""
    if base_type.order != 2:
        raise ValueError(f"compositions raise symmetric steps of order 2; "
                         f"{base_type.__name__} has order {base_type.order}")
    order, coefficients = SCHEMES[scheme]
    return type(f"{scheme.capitalize()}{base_type.__name__}", (Composition,),
                {"order": order, "base_type": base_type, "coefficients": coefficients})


class Composition(Stepper):
    """``Φ_{c_s h} ∘ … ∘ Φ_{c_1 h}`` of a base step ``Φ`` (see :func:`compose`).

    One base stepper per distinct coefficient, so each keeps the constants of its own
    sub-step size from step to step. Deferred work of a base stepper (rule 6) is
    finished before a sub-step of another size (:func:`settle`). The step's
    legitimacy (:func:`composable`) is the caller's to check.
    """

    base_type = None
    coefficients: tuple = ()

    def __init__(self, problem):
        super().__init__(problem)
        roles = {}
        for c in self.coefficients:
            roles.setdefault(c, self.base_type(problem))
        self._roles = roles
        self._first = roles[self.coefficients[0]]

    @property
    def logits_in_dissipation(self):
        return getattr(self._first, "logits_in_dissipation", False)

    def start(self, state):
        return self._first.start(state)

    def step(self, st, carry, h):
        t_end = st.t + h
        for c in self.coefficients:
            base = self._roles[c]
            st, carry = settle(base, st, carry, c * h)
            st, carry = base.step(st, carry, c * h)
        if not math.isclose(st.t, t_end, rel_tol=0.0, abs_tol=1e-12 * max(1.0, abs(t_end))):
            raise RuntimeError(f"composed sub-steps ended at t = {st.t!r}, not {t_end!r}")
        # the sub-steps' times sum to t + h up to rounding: the step ends exactly there
        return replace(st, t=t_end), carry

    def finish(self, state, carry):
        return self._first.finish(state, carry)

    def batch(self, n_tokens: int) -> int:
        return self._first.batch(n_tokens)


def settle(base, st, carry, h):
    """``(st, carry)`` ready for a step of ``h`` by ``base``: deferred work of steps of
    another size finished first (a :class:`~.tracked_verlet.TrackedEtdVerlet` defers the
    tracking bound of steps that share one size, ``carry.pending``)."""
    pending = getattr(carry, "pending", None)
    if pending is not None and pending.constants.h != h:
        return base.finish(st, carry)
    return st, carry


__all__ = ["SCHEMES", "Composition", "composable", "compose", "settle"]
