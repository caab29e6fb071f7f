"""Numerical detection of finite-time blow-up (Theory page, Part II).

An adaptive ``solve_ivp`` run stops on a terminal event ``size(y) = threshold``;
the event time approximates the blow-up time (for ``s ~ (T - t)^{-p}`` the error is
``threshold^{-1/p}``). A fixed-step detector does the same for a given one-step map.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp


@dataclass(frozen=True)
class BlowupResult:
    """Outcome of a blow-up search.

    Attributes
    ----------
    time : float
        First time ``size(y)`` reached the threshold; ``inf`` if it did not by ``t_max``.
    t : ndarray, shape (n,)
        Times of the recorded states.
    y : ndarray, shape (n, m)
        Recorded states.
    """

    time: float
    t: np.ndarray
    y: np.ndarray

    @property
    def blew_up(self) -> bool:
        """Whether the threshold was reached before ``t_max``."""
        return bool(np.isfinite(self.time))


def integrate_until_blowup(fun: Callable, y0: np.ndarray, t_max: float,
                           size: Callable[[np.ndarray], float], threshold: float, *,
                           t_eval: np.ndarray | None = None, rtol: float = 1e-10,
                           atol: float = 1e-12, method: str = "DOP853",
                           t0: float = 0.0) -> BlowupResult:
    """Integrate ``ẏ = fun(t, y)`` until ``size(y) ≥ threshold`` or ``t_max``.

    Parameters
    ----------
    fun : callable ``(t, y) -> ẏ``, y of shape (m,)
    y0 : ndarray, shape (m,)
    t_max : float
    size : callable ``y -> float``
        A norm of the state, e.g. the largest eigenvalue of ``S``.
    threshold : float
    t_eval : ndarray, optional
        Output times (those past the event are dropped); the event state is appended.
    rtol, atol : float
        Tolerances of the adaptive solver.
    method : str
        ``solve_ivp`` method.
    t0 : float
        Initial time.

    Returns
    -------
    BlowupResult
        A solver failure (step size collapsing at a singularity) counts as blow-up
        at the last time reached; a start at or above ``threshold`` (or not finite) as
        blow-up at ``t0`` (the event fires on an upward crossing only: such a run would
        go on to ``t_max``).
    """
    y0 = np.asarray(y0, float)
    with np.errstate(over="ignore", invalid="ignore"):
        start = size(y0) if np.all(np.isfinite(y0)) else np.inf
    if not start < threshold:
        return BlowupResult(float(t0), np.array([float(t0)]), y0[None].copy())
    log_thr = np.log(threshold)

    def event(t, y):
        s = size(y)
        return np.log(s) - log_thr if s > 0 and np.isfinite(s) else (
            1.0 if not np.isfinite(s) else -1.0)

    event.terminal = True
    event.direction = 1.0

    def safe_fun(t, y):
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            return fun(t, y)

    if t_eval is not None:
        t_eval = np.asarray(t_eval, float)
        t_eval = t_eval[(t_eval >= t0) & (t_eval <= t_max)]
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        sol = solve_ivp(safe_fun, (t0, t_max), y0, method=method,
                        rtol=rtol, atol=atol, events=event, t_eval=t_eval,
                        dense_output=False)
    # (with t_eval, a solver that fails at once leaves sol.y a list)
    t, y = np.asarray(sol.t, float), np.asarray(sol.y, float).reshape(len(y0), -1).T
    if sol.status == 1 and len(sol.t_events[0]):
        te = float(sol.t_events[0][0])
        ye = sol.y_events[0][0]
        if t_eval is not None:
            t, y = np.append(t, te), np.vstack([y, ye[None]])
        return BlowupResult(te, t, y)
    if sol.status == -1:
        return BlowupResult(float(t[-1]) if len(t) else t0, t, y)
    return BlowupResult(np.inf, t, y)


def fixed_step_blowup(step: Callable[[float, np.ndarray, float], np.ndarray],
                      y0: np.ndarray, h: float, t_max: float,
                      size: Callable[[np.ndarray], float], threshold: float,
                      t0: float = 0.0) -> float:
    """First grid time ``t0 + k h`` at which ``size(y) ≥ threshold`` (or ``y`` non-finite).

    Parameters
    ----------
    step : callable ``(t, y, h) -> y_next``
    y0 : ndarray
    h, t_max, threshold : float
    size : callable ``y -> float``
    t0 : float

    Returns
    -------
    float
        The detection time, ``inf`` if none up to ``t_max``.
    """
    y, t = np.asarray(y0, float), t0
    n = int(np.ceil((t_max - t0) / h - 1e-12))
    for _ in range(n):
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            y = step(t, y, h)
            t += h
            s = size(y) if np.all(np.isfinite(y)) else np.inf
        if not np.isfinite(s) or s >= threshold:
            return t
    return np.inf
