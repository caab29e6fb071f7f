"""Heun's method followed by a projection onto the sphere, order 2, for a flow on the
unit sphere ``ẋ_i = P_{x_i} v_i(X)`` (normalised Transformer flow).

One Heun step in the ambient space, then every token divided by its norm (the standard
projection method: the projection of an order-``p`` step keeps order ``p`` and puts
``‖x_i‖ = 1`` back to rounding error at every step). The predictor is projected too (an
``O(h²)`` change of it, ``O(h³)`` in the step: the order stays 2), so the field is only
ever evaluated on the sphere, where the kernel ``e^{β x_iᵀ M x_j}`` is bounded. A step
that would turn a token by more than :data:`MAX_TURN` radians raises
:class:`~dynamics.steppers.base.TooStiff` (the unnormalised kernel moves tokens at
speeds up to ``e^β``). The scheme calls the model's
``problem.field(X)``, ``problem.retract(X)`` and ``problem.slaved(X, owned, busy)``; the
field at the end (at the projected tokens) is carried to the next step.
"""

from __future__ import annotations

import numpy as np

from ..state import State
from ..workspace import Owned
from .base import Stepper, TooStiff
from .heun import VelocityCarry

#: Largest ``h max_i ‖ẋ_i‖`` of a step (radians on the unit sphere).
MAX_TURN = 0.5


class ProjectedHeun(Stepper):
    """Heun's method, then the projection onto the sphere (see the module docstring)."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.owned = Owned()

    def start(self, state):
        return VelocityCarry()

    def step(self, st, carry, h):
        prob = self.problem
        v0 = prob.field(st.X) if carry.velocity is None else carry.velocity
        turn = h * float(np.sqrt(np.max(np.einsum("ij,ij->i", v0, v0))))
        if turn > MAX_TURN:
            raise TooStiff(f"a step of dt = {h:g} turns a token by {turn:.3g} rad (more than "
                           f"{MAX_TURN:g}): lower dt below {h * MAX_TURN / turn:.3g} or β")
        v_pred = prob.field(prob.retract(st.X + h * v0))
        X1 = prob.retract(st.X + (0.5 * h) * (v0 + v_pred))
        S1, Z1, A1 = prob.slaved(X1, self.owned, (st.S, st.Z, st.A))
        new = State(t=st.t + h, X=X1, P=st.P, Z=Z1, A=A1, S=S1, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated, work=st.work)
        return new, VelocityCarry(prob.field(X1))
