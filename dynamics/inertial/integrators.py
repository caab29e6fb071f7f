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
    k = fun(t, y)
    y_new = y + (h / 6.0) * k  # the stages are added up as they come
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
