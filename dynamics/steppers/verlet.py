"""Velocity Verlet for ``Ẋ = P/m``, ``Ṗ = force(X)``: symplectic, order 2 (reduced model).

The scheme calls the model's ``problem.slaved(X, out)`` (scores, logits and attention
``A*(X)``) and ``problem.force(X, A)``; the force at the end is carried to the next step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..state import State
from ..workspace import Owned
from .base import Stepper


def verlet(X, P, force, mass, h):
    """One readable velocity-Verlet step of ``Ẋ = P/m, Ṗ = force(X)``: ``(X₁, P₁)``."""
    P_half = P + 0.5 * h * force(X)
    X1 = X + (h / mass) * P_half
    return X1, P_half + 0.5 * h * force(X1)


@dataclass(frozen=True)
class ForceCarry:
    """The force at the state, shape (N, d)."""

    force: np.ndarray | None = None


class Verlet(Stepper):
    """Velocity Verlet with slaved attention (see the module docstring)."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.owned = Owned()

    def start(self, state):
        return ForceCarry()

    def step(self, st, carry, h):
        prob = self.problem
        force0 = carry.force if carry.force is not None else prob.force(st.X, st.A)[0]
        P_half = st.P + (0.5 * h) * force0
        X1 = st.X + (h / prob.mass) * P_half
        S1, Z1, A1 = prob.slaved(X1, self.owned, (st.S, st.Z, st.A))
        force1 = prob.force(X1, A1)[0]
        P1 = P_half + (0.5 * h) * force1
        new = State(t=st.t + h, X=X1, P=P1, Z=Z1, A=A1, S=S1, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated, work=st.work)
        return new, ForceCarry(force1)
