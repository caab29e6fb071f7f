"""The exact logit step on a prescribed feature path (attention-only model).

Logits: ``Z₁ = E Z₀ + β(1 − E) S₀ + β ψ(λh)(S₁ − S₀)`` — exact for scores linear in
time, order 2 otherwise. Work ``−∫⟨A, dS/dt⟩`` and dissipation ``∫D`` by the trapezoidal
rule while the relaxation is resolved (``λh`` ≤ 0.05), else along the step's Strang
companion (relax h/2, move the scores with ``A`` frozen, relax h/2), exact for frozen
scores at any ``λh``. A jump of the path is stepped onto, and its work (with attention
frozen) is added exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import energy as en
from ..logits import exp_trapezoid, logit_dissipation_rate, logit_step
from ..models.part_one import score_rate
from ..relaxation import relaxation_averages
from ..state import State
from ..workspace import Workspace
from .base import Stepper

#: Above this λh the steps integrate the relaxation's transients exactly (in u = e^{−λs});
#: below it the trapezoidal rule is second order.
STIFF_LAMBDA_H = 0.05


@dataclass(frozen=True)
class LogitCarry:
    """What the next step reuses: ``D``, ``⟨A, dS/dt⟩`` and ``osc(dS/dt)`` at the state."""

    D: float | None = None
    A_S_dot: float | None = None
    osc_S_dot: np.ndarray | None = None


class ExactLogit(Stepper):
    """The exact logit step with work and dissipation; the path gives ``X(t)``, ``Ẋ(t)``."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()

    def start(self, state):
        return LogitCarry()

    def step(self, st, carry, h):
        prob, path, work_ = self.problem, self.problem.path, self.work
        beta, lam = prob.beta, prob.relaxation_rate
        jump = next((ts for ts in path.jumps if st.t < ts <= st.t + h * (1 + 1e-9)), None)
        if jump is not None:
            h = jump - st.t
        t1 = jump if jump is not None else st.t + h
        X1, X1_dot = path(np.nextafter(t1, -np.inf) if jump is not None else t1)
        X1M = X1 @ prob.M
        S1 = X1M @ X1.T
        S1_dot = score_rate(X1, X1_dot, prob.M, X1M)
        Z1 = logit_step(st.Z, st.S, S1, beta, lam, h)
        A1 = en.rowsoftmax(Z1, centred=True)
        D1 = None
        if lam * h > STIFF_LAMBDA_H:
            # Work and dissipation along the Strang companion of the step, exact for
            # frozen scores at any λh.
            shape = st.Z.shape
            Zh, Ah, _, _, _, mean_d1 = relaxation_averages(
                st.Z, st.S, beta, lam, h / 2, st.A, D0=carry.D, mean_A=False,
                work=work_, out=(work_.get("att.Zh", shape), work_.get("att.Ah", shape)))
            dS = np.subtract(S1, st.S, out=work_.get("att.dS", shape))
            work = -float(np.vdot(Ah, dS))
            _, _, _, _, _, mean_d2 = relaxation_averages(
                Zh, S1, beta, lam, h / 2, Ah, mean_A=False, work=work_,
                out=(work_.get("att.Z2", shape), work_.get("att.A2", shape)))
            d1, d2 = 0.5 * h * mean_d1, 0.5 * h * mean_d2
            a_sdot1 = float(np.vdot(A1, S1_dot))
        else:  # trapezoidal rule: second order while the relaxation is resolved
            D0 = carry.D if carry.D is not None else logit_dissipation_rate(
                st.A, st.Z, st.S, beta, lam, work_)
            D1 = logit_dissipation_rate(A1, Z1, S1, beta, lam, work_)
            d1, d2 = 0.5 * h * (D0 + D1), 0.0
            a_sdot0 = carry.A_S_dot
            if a_sdot0 is None:
                a_sdot0 = float(np.vdot(st.A, st.S_dot))
            a_sdot1 = float(np.vdot(A1, S1_dot))
            work = -0.5 * h * (a_sdot0 + a_sdot1)
        osc0 = carry.osc_S_dot
        osc0 = en.oscillation(st.S_dot) if osc0 is None else osc0
        osc1 = en.oscillation(S1_dot)
        w0, w1 = exp_trapezoid(lam, h)
        B = math.exp(-lam * h) * st.B + beta * (w0 * osc0 + w1 * osc1)
        if jump is not None:  # the jump does work with attention frozen
            X1, X1_dot = path(t1)
            S_new = en.scores(X1, prob.M)
            work -= float(np.sum(A1 * (S_new - S1)))
            B = B + beta * en.oscillation(S_new - S1)
            S1, S1_dot = S_new, score_rate(X1, X1_dot, prob.M)
            new_carry = LogitCarry()
        else:
            new_carry = LogitCarry(D=D1, A_S_dot=a_sdot1, osc_S_dot=osc1)
        new = State(t=t1, X=X1, P=st.P, Z=Z1, A=A1, S=S1, S_dot=S1_dot, B=B,
                    dissipated=st.dissipated + d1 + d2, work=st.work + work)
        return new, new_carry
