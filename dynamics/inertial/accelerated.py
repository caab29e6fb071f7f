"""Accelerated linear attention, a damped Hamiltonian system (Theory page: "Accelerated
linear attention").

Particles carry positions ``x_i`` and momenta ``y_i``::

    ẋ_i = (1/N) Σ_j (x_iᵀ A x_j) y_j
    ẏ_i = −α y_i − (1/N) Σ_j (y_iᵀ y_j) A x_j + V x_i

with ``H = (1/2N) Σ_ij (x_iᵀ A x_j)(y_iᵀ y_j) − ½ Σ_i x_iᵀ V x_i`` and symmetric ``A``,
``V`` (``H`` sees only their symmetric parts: the particle functions refuse others with a
``ValueError``). For ``y_i = P x_i``
the moments obey ``Ṡ = P S A S + S A S P``, ``Ṗ = −α P − (P² S A + A S P²) + V`` with
``H(S, P) = ½ tr(A S P² S) − ½ tr(V S)`` (the particle ``H`` is ``N`` times it).
"""

from __future__ import annotations

import numpy as np

from .blowup import integrate_until_blowup
from .damping import Damping
from .linear import MomentTrajectory, largest_eigenvalue
from .matrices import require_symmetric

_WHO = "accelerated linear attention"


def _check(A: np.ndarray, V: np.ndarray | None = None) -> None:
    require_symmetric(A, "kernel A", _WHO)
    if V is not None:
        require_symmetric(V, "value matrix V", _WHO)


def accelerated_velocity(X: np.ndarray, Y: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``ẋ_i = (1/N) Σ_j (x_iᵀ A x_j) y_j = ∂H/∂y_i``, shape (N, d)."""
    _check(A)
    return X @ (A @ (X.T @ Y)) / X.shape[0]


def accelerated_force(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                      V: np.ndarray) -> np.ndarray:
    """Conservative force ``−∂H/∂x_i = −(1/N) Σ_j (y_iᵀ y_j) A x_j + V x_i``, shape (N, d)."""
    _check(A, V)
    return -Y @ (Y.T @ X) @ A / X.shape[0] + X @ V


def accelerated_kinetic(X: np.ndarray, Y: np.ndarray, A: np.ndarray) -> float:
    """``(1/2N) Σ_ij (x_iᵀ A x_j)(y_iᵀ y_j) = (1/2N) tr(A M Mᵀ)``, ``M = XᵀY``."""
    _check(A)
    M = X.T @ Y
    return float(np.sum(A * (M @ M.T)) / (2 * X.shape[0]))


def accelerated_hamiltonian(X, Y, A, V) -> float:
    """``H = (1/2N) Σ_ij (x_iᵀ A x_j)(y_iᵀ y_j) − ½ Σ_i x_iᵀ V x_i``."""
    _check(A, V)
    return accelerated_kinetic(X, Y, A) - 0.5 * float(np.sum((X @ V) * X))


def accelerated_dissipation(X, Y, A) -> float:
    """``Σ_i y_i · ∂H/∂y_i`` (``= 2 × kinetic``); ``dH/dt = −α`` times this."""
    return float(np.sum(Y * accelerated_velocity(X, Y, A)))


def matrix_field(S, P, A, V, alpha: float):
    """The closed moment system (Theory page: "Accelerated linear attention").

    ``Ṡ = P S A S + S A S P``, ``Ṗ = −α P − (P² S A + A S P²) + V``.

    Parameters
    ----------
    S, P, A, V : ndarray, shape (d, d)
    alpha : float

    Returns
    -------
    dS, dP : ndarray, shape (d, d)
    """
    M = P @ S @ A @ S
    Q = P @ P @ S @ A
    return M + M.T, -alpha * P - (Q + Q.T) + V


def matrix_hamiltonian(S, P, A, V) -> float:
    """``H(S, P) = ½ tr(A S P² S) − ½ tr(V S)``."""
    return 0.5 * float(np.trace(A @ S @ P @ P @ S)) - 0.5 * float(np.trace(V @ S))


def matrix_dissipation(S, P, A) -> float:
    """``tr(A S P² S)``; ``dH/dt = −α`` times this."""
    return float(np.trace(A @ S @ P @ P @ S))


def accelerated_trajectory(A, V, S0, P0, damping: Damping, t_max: float, *,
                           t_eval=None, threshold: float = 1e10, rtol: float = 1e-10,
                           atol: float = 1e-12, t_start: float = 0.0) -> MomentTrajectory:
    """Solve the ``(S, P)`` system with ``solve_ivp`` until ``λ_max(S) ≥ threshold``.

    Parameters
    ----------
    A, V, S0, P0 : ndarray, shape (d, d)
    damping : Damping
    t_max : float
    t_eval : array_like, optional
    threshold, rtol, atol : float
    t_start : float
        Initial time (the damping is evaluated at absolute time ``t``).

    Returns
    -------
    MomentTrajectory
    """
    d = A.shape[0]

    def fun(t, y):
        dS, dP = matrix_field(y[: d * d].reshape(d, d), y[d * d:].reshape(d, d), A, V,
                              float(damping.rate(t)))
        return np.concatenate([dS.ravel(), dP.ravel()])

    y0 = np.concatenate([np.asarray(S0, float).ravel(), np.asarray(P0, float).ravel()])
    res = integrate_until_blowup(fun, y0, t_max,
                                 lambda y: largest_eigenvalue(y[: d * d].reshape(d, d)),
                                 threshold, t_eval=t_eval, rtol=rtol, atol=atol,
                                 t0=t_start)
    n = len(res.t)
    return MomentTrajectory(res.t, res.y[:, : d * d].reshape(n, d, d),
                            res.y[:, d * d:].reshape(n, d, d), res.time)


def accelerated_blowup_time(A, V, S0, P0, damping: Damping, threshold: float = 1e10,
                            t_max: float = 100.0, t_start: float = 0.0) -> float:
    """Numerical blow-up time of the accelerated moment system (``inf`` if none by ``t_max``).

    No closed form is known (Theory page: "Accelerated linear attention"); this is the
    time ``λ_max(S)`` reaches ``threshold`` (late growth ``s ~ (T − t)^{-2}``, so the
    error is ``~threshold^{-1/2}``).
    """
    return accelerated_trajectory(A, V, S0, P0, damping, t_max, threshold=threshold,
                                  t_start=t_start).blowup_time


def undamped_blowup_time(a, v, s) -> float:
    """Exact accelerated blow-up time for ``α = 0``, ``P(0) = 0``, commuting data.

    Conservation of ``H`` gives ``a p² s² = v (s − s_0)``, hence
    ``ṡ = 2 s √(a v (s − s_0))`` and ``T = π / (2 √(a v s_0))``; the minimum over
    ``a_k v_k > 0`` is returned (``inf`` if none). Derived on the Theory page,
    "Accelerated linear attention".
    """
    a, v, s = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, float)) for x in (a, v, s)))
    k = a * v * s
    return float(np.pi / (2.0 * np.sqrt(k[k > 0].max()))) if np.any(k > 0) else np.inf
