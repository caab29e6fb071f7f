"""Fixed-step integrators for the streaming engine (MODEL.md Part III)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

RK4_ORDER = 4


def rk4_step(fun: Callable[[float, np.ndarray], np.ndarray], t: float,
             y: np.ndarray, h: float) -> np.ndarray:
    """One classical Runge–Kutta step (order 4) of ``ẏ = fun(t, y)``.

    Parameters
    ----------
    fun : callable ``(t, y) -> ẏ``
    t : float
    y : ndarray, any shape
    h : float

    Returns
    -------
    ndarray, same shape as ``y``
    """
    k1 = fun(t, y)
    k2 = fun(t + 0.5 * h, y + 0.5 * h * k1)
    k3 = fun(t + 0.5 * h, y + 0.5 * h * k2)
    k4 = fun(t + h, y + h * k3)
    return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
