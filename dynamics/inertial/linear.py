"""First-order linear attention with a bilinear kernel (Theory page: "First-order linear
attention").

Particles ``ẋ_i = V S A x_i`` with ``S = (1/N) Σ_j x_j x_jᵀ``; the second moment
obeys the closed Riccati system ``Ṡ = V S A S + S A S V``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blowup import integrate_until_blowup
from .clouds import second_moment


def linear_velocity(X: np.ndarray, A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Velocities ``ẋ_i = V S A x_i`` (Theory page: "First-order linear attention").

    Parameters
    ----------
    X : ndarray, shape (N, d)
    A, V : ndarray, shape (d, d)
        Any matrices (the settings give symmetric ones).

    Returns
    -------
    ndarray, shape (N, d)
        Rows ``(V S A x_i)ᵀ = x_iᵀ Aᵀ S Vᵀ``.
    """
    At, Vt = np.ascontiguousarray(A.T), np.ascontiguousarray(V.T)  # = A, V when symmetric
    return X @ (At @ second_moment(X) @ Vt)


def moment_field(S: np.ndarray, A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``Ṡ = V S A S + S Aᵀ S Vᵀ`` (Theory page: "First-order linear attention": ``A``, ``V``
    symmetric there), the moment law of :func:`linear_velocity` for any ``A``, ``V``,
    shape (d, d)."""
    M = V @ S @ A @ S
    return M + M.T


def first_order_blowup_time(a, v, s) -> float:
    """Closed-form ``T_max = min_{v_k > 0} 1/(2 a_k v_k s_k)``.

    Parameters
    ----------
    a, v, s : array_like, shape (d,) or scalars
        Eigenvalues of commuting ``A``, ``V``, ``S(0)``.

    Returns
    -------
    float
        ``inf`` when no ``a_k v_k s_k > 0`` (``V ⪯ 0``).
    """
    a, v, s = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, float)) for x in (a, v, s)))
    rate = 2.0 * a * v * s
    pos = rate[rate > 0]
    return float(1.0 / pos.max()) if pos.size else np.inf


def closed_form_moments(a, v, s, t) -> np.ndarray:
    """``s_k(t) = s_k / (1 − 2 a_k v_k s_k t)``, ``inf`` past blow-up.

    Parameters
    ----------
    a, v, s : array_like, shape (d,)
    t : array_like, shape (n,)

    Returns
    -------
    ndarray, shape (n, d)
    """
    a, v, s = (np.atleast_1d(np.asarray(x, float)) for x in (a, v, s))
    t = np.atleast_1d(np.asarray(t, float))[:, None]
    den = 1.0 - 2.0 * a * v * s * t
    out = np.full(den.shape, np.inf)
    np.divide(np.broadcast_to(s, den.shape), den, out=out, where=den > 0)
    return out


def crossing_time_closed_form(a, v, s, theta: float) -> float:
    """First time some ``s_k(t)`` reaches ``θ`` (commuting data), ``inf`` if never.

    From ``s_k/(1 − 2 a_k v_k s_k t) = θ``: ``t = (1 − s_k/θ)/(2 a_k v_k s_k)``.
    """
    a, v, s = (np.atleast_1d(np.asarray(x, float)) for x in (a, v, s))
    a, v, s = np.broadcast_arrays(a, v, s)
    if np.any(s >= theta):
        return 0.0
    rate = 2.0 * a * v * s
    ok = rate > 0
    if not ok.any():
        return np.inf
    return float(np.min((1.0 - s[ok] / theta) / rate[ok]))


@dataclass(frozen=True)
class MomentTrajectory:
    """Second-moment (and ``P``) trajectory of a moment system.

    Attributes
    ----------
    t : ndarray, shape (n,)
    S : ndarray, shape (n, d, d)
    P : ndarray, shape (n, d, d) or None
        Momentum matrix (accelerated model), ``None`` for first order.
    blowup_time : float
        Time ``λ_max(S)`` reached the threshold, ``inf`` if not before ``t_max``.
    """

    t: np.ndarray
    S: np.ndarray
    P: np.ndarray | None
    blowup_time: float


def largest_eigenvalue(S: np.ndarray) -> float:
    """``λ_max`` of a symmetric matrix (``inf`` if not finite)."""
    if not np.all(np.isfinite(S)):
        return np.inf
    return float(np.linalg.eigvalsh(0.5 * (S + S.T))[-1])


def moment_trajectory(S0: np.ndarray, A: np.ndarray, V: np.ndarray, t_max: float, *,
                      t_eval=None, threshold: float = 1e10, rtol: float = 1e-10,
                      atol: float = 1e-12) -> MomentTrajectory:
    """Solve ``Ṡ = V S A S + S A S V`` with ``solve_ivp`` up to blow-up or ``t_max``.

    Parameters
    ----------
    S0, A, V : ndarray, shape (d, d)
    t_max : float
    t_eval : array_like, optional
        Output times; default the solver's own steps.
    threshold : float
        ``λ_max(S)`` at which the run stops as blown up.
    rtol, atol : float

    Returns
    -------
    MomentTrajectory
    """
    d = S0.shape[0]

    def fun(t, y):
        return moment_field(y.reshape(d, d), A, V).ravel()

    res = integrate_until_blowup(fun, S0.ravel(), t_max,
                                 lambda y: largest_eigenvalue(y.reshape(d, d)),
                                 threshold, t_eval=t_eval, rtol=rtol, atol=atol)
    return MomentTrajectory(res.t, res.y.reshape(-1, d, d), None, res.time)


def first_order_blowup_numeric(S0, A, V, t_max: float = 100.0,
                               threshold: float = 1e10) -> float:
    """Blow-up time of ``Ṡ = V S A S + S A S V`` found by ``solve_ivp`` (``inf`` if none)."""
    return moment_trajectory(S0, A, V, t_max, threshold=threshold).blowup_time
