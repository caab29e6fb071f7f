"""The classical Runge–Kutta scheme, order 4, for the Part II models (Theory page, Part II).

The state ``(X, Y)`` is advanced stacked as one array of shape (2, N, d). The scheme calls
the model's ``problem.field(t, y, work)``, which returns ``ẏ`` of that shape (``work``: the
stepper's :class:`~dynamics.workspace.Workspace` for the field's N×N buffers). A step runs
with overflow, invalid operations and underflow ignored, so that a run that blows up
reaches a non-finite state, which the model's ``check`` turns into a stopped run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..state import State
from ..workspace import Workspace
from .base import Stepper


def rk4_step(fun: Callable[[float, np.ndarray], np.ndarray], t: float, y: np.ndarray,
             h: float) -> np.ndarray:
    """One classical Runge–Kutta step (order 4) of ``ẏ = fun(t, y)``.

    ``y + (h/6)(k₁ + 2k₂ + 2k₃ + k₄)``, the stages added up as they come.

    Parameters
    ----------
    fun : callable ``(t, y) -> ẏ``
        ``ẏ`` of the shape of ``y``.
    t : float
    y : ndarray, any shape
        Not modified.
    h : float

    Returns
    -------
    ndarray, same shape as ``y``
        A new array.
    """
    k = fun(t, y)
    y_new = y + (h / 6.0) * k
    stage = y + (0.5 * h) * k
    k = fun(t + 0.5 * h, stage)
    y_new += (h / 3.0) * k
    np.multiply(k, 0.5 * h, out=stage)
    stage += y
    k = fun(t + 0.5 * h, stage)
    y_new += (h / 3.0) * k
    np.multiply(k, h, out=stage)
    stage += y
    y_new += (h / 6.0) * fun(t + h, stage)
    return y_new


@dataclass(frozen=True)
class StackedCarry:
    """The state ``(X, Y)`` stacked, shape (2, N, d); ``state.X`` and ``state.P`` are
    its two halves (views), never written."""

    y: np.ndarray


class RK4(Stepper):
    """Classical RK4 on the stacked state (see the module docstring)."""

    order = 4

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()

    def start(self, state):
        return StackedCarry(np.stack([state.X, state.P]))

    def step(self, st, carry, h):
        field, work = self.problem.field, self.work
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            y = rk4_step(lambda t, z: field(t, z, work), st.t, carry.y, h)
        return State(t=st.t + h, X=y[0], P=y[1]), StackedCarry(y)


__all__ = ["RK4", "StackedCarry", "rk4_step"]
