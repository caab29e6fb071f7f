"""Heun's method (explicit trapezoid), order 2, for a first-order flow ``Ẋ = v(X)``
(first-order Transformer flow).

The scheme calls the model's ``problem.velocity(X, A)`` and ``problem.slaved(X, owned,
busy)``; the velocity at the end is carried to the next step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..state import State
from ..workspace import Owned, Workspace
from .base import Stepper


def heun(y, rhs, h):
    """One readable Heun step for ``ẏ = rhs(y)``, ``y`` a tuple of arrays."""
    k1 = rhs(y)
    k2 = rhs(tuple(a + h * b for a, b in zip(y, k1, strict=True)))
    return tuple(a + 0.5 * h * (b + c) for a, b, c in zip(y, k1, k2, strict=True))


@dataclass(frozen=True)
class VelocityCarry:
    """The velocity at the state, shape (N, d)."""

    velocity: np.ndarray | None = None


class Heun(Stepper):
    """Heun's method with slaved attention (see the module docstring)."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()
        self.owned = Owned()

    def start(self, state):
        return VelocityCarry()

    def step(self, st, carry, h):
        prob = self.problem
        v0 = carry.velocity
        v0 = prob.velocity(st.X, st.A) if v0 is None else v0
        X_pred = st.X + h * v0
        A_pred = prob.softmax_into(X_pred, self.work.get("heun.A", st.Z.shape))
        v_pred = prob.velocity(X_pred, A_pred)
        X1 = st.X + (0.5 * h) * (v0 + v_pred)
        S1, Z1, A1 = prob.slaved(X1, self.owned, (st.S, st.Z, st.A))
        v1 = prob.velocity(X1, A1)
        new = State(t=st.t + h, X=X1, P=st.P, Z=Z1, A=A1, S=S1, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated, work=st.work)
        return new, VelocityCarry(v1)
