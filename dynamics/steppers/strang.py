"""Strang splitting ``R(h/2) ∘ Heun(h) ∘ R(h/2)`` (cotangent lift) while the relaxation is
resolved (``λh`` up to ``STIFF_LAMBDA_H``); above, the splitting's order falls to 1 (it
drops the lag of attention behind its moving target) and the steps are those of
:class:`~dynamics.steppers.etd_heun.EtdHeun`.

``R`` relaxes the logits exactly towards the frozen target ``βŜ``; Heun's method moves
``(X, P)`` with attention frozen. The scheme calls the model's
``problem.target(X, P, out)`` (``βŜ`` with row maxima 0) and ``problem.frozen_field(X, P,
A)`` (``(Ẋ, Ṗ)`` at frozen ``A``).

The targets are kept with row maxima 0 (row constants change no attention), as
:func:`~dynamics.relaxation.relax_to_target` needs. The end one is also the target of
the next step's first relaxation, which continues the same exact path: it is computed in
the same sweep as this step's second one (:func:`~dynamics.relaxation.relax_chain`) and
kept in the carry, for a next step of the same ``h``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..relaxation import relax_chain, relax_to_target
from ..state import State
from ..workspace import Owned, Workspace
from .base import Stepper
from .etd_heun import EtdHeun, HeunCarry
from .exact_logit import STIFF_LAMBDA_H


@dataclass(frozen=True)
class StrangCarry:
    """The target ``βų`` at the state, ``D`` and ``κ₃`` there, and the next step's first
    half relaxation ``(h, Z_half, A_half, mean D)`` when already done."""

    target: np.ndarray | None = None
    D: float | None = None
    K: float | None = None
    half: tuple | None = None
    #: the state is no distant start (see ``VerletCarry.continued``)
    continued: bool = False


class Strang(Stepper):
    """Exact relaxation, Heun for the features, exact relaxation (stiff steps:
    :class:`~dynamics.steppers.etd_heun.EtdHeun`)."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()
        self.owned = Owned()
        self.stiff = EtdHeun(problem)

    def start(self, state):
        return StrangCarry()

    def perturbed(self, state, carry, spread):
        """Noisy logits (rule 8): the target ``βŜ(X, P)`` stays; the rest goes, and the
        state is no distant start (``continued``)."""
        return state, type(carry)(target=carry.target, continued=True)

    def continued(self, carry):
        """A run continued after a setting change (rule 9): no distant start."""
        return replace(carry, continued=True)

    def step(self, st, carry, h):
        if self.problem.relaxation_rate * h > STIFF_LAMBDA_H:
            if not isinstance(carry, HeunCarry):  # after a non-stiff step: no start
                carry = HeunCarry(target=carry.target, D=carry.D,
                                  continued=carry.continued or carry.target is not None)
            return self.stiff.step(st, carry, h)
        if not isinstance(carry, StrangCarry):  # after a stiff step: its target only
            carry = StrangCarry(target=carry.target)
        prob, work, owned = self.problem, self.work, self.owned
        beta, lam, shape = prob.beta, prob.relaxation_rate, st.Z.shape
        busy = (st.Z, st.A, carry.target) + (carry.half[1:3] if carry.half else ())
        half = carry.half
        if half is not None and half[0] == h:
            _, Zh, Ah, mean_d1 = half
        else:
            target0 = carry.target
            if target0 is None:
                target0 = prob.target(st.X, st.P, owned.take("lift.T", shape, busy))
            Zh, Ah, _, _, mean_d1, _ = relax_to_target(
                st.Z, target0, beta, lam, h / 2, st.A, D0=carry.D, K0=carry.K,
                centre=False, work=work,
                out=(work.get("lift.Zh", shape), work.get("lift.Ah", shape)))
        # Heun's method for (X, P) with A frozen
        X0, P0 = st.X, st.P
        kx1, kp1 = prob.frozen_field(X0, P0, Ah)
        kx2, kp2 = prob.frozen_field(X0 + h * kx1, P0 + h * kp1, Ah)
        kx1 += kx2
        kp1 += kp2
        X1 = X0 + (0.5 * h) * kx1
        P1 = P0 + (0.5 * h) * kp1
        target1 = prob.target(X1, P1, owned.take("lift.T", shape, busy))
        (Z1, A1, _, D1, mean_d2, K1), (Zh1, Ah1, _, _, mean_d1_next, _) = relax_chain(
            Zh, target1, beta, lam, (h / 2, h / 2), Ah, centre=False, work=work,
            outs=((owned.take("lift.Z", shape, busy), owned.take("lift.A", shape, busy)),
                  (owned.take("lift.Zh", shape, busy), owned.take("lift.Ah", shape, busy))))
        # the scheme never needs S(X₁): the diagnostics compute it when asked
        new = State(t=st.t + h, X=X1, P=P1, Z=Z1, A=A1, S=None, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated + 0.5 * h * (mean_d1 + mean_d2), work=st.work)
        return new, StrangCarry(target=target1, D=D1, K=K1,
                                half=(h, Zh1, Ah1, mean_d1_next))
