"""Softmax attention, first order and inertial (MODEL.md §13).

Kernel ``e^{x_iᵀ A x_j}``, ``B = V A⁻¹`` symmetric positive definite,
``z_i = Σ_j e^{x_iᵀ A x_j}``, ``q_i = y_iᵀ B y_i``, ``r_i = q_i / z_i²``.

* first order: ``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``;
* inertial: ``ẋ_i = N B y_i / z_i``,
  ``ẏ_i = −α y_i + (N/2) Σ_j e^{x_iᵀ A x_j} (r_i + r_j + 2) A x_j``,
  ``H = (N/2) [Σ_i q_i / z_i − Σ_ij e^{x_iᵀ A x_j}]``;
* momentum-only control: ``ẋ_i = y_i``, ``ẏ_i = −α y_i + v_i(X)``.

The raw exponentials matter (the inertial field is not invariant under row shifts of
the scores), so they are never formed directly: every sum ``Σ_j e^{e_ij} w_j`` is
evaluated as ``e^{m} Σ_j e^{e_ij − m} w_j`` with a shared scale ``m = max e_ij`` and
``log z_i`` by a log-sum-exp. The bounded sums never overflow; only the final scalar
factor ``e^{m}`` can, and then the true value is not representable (``inf``).
"""

from __future__ import annotations

import numpy as np

from ..integrators import Workspace


def kernel_scores(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Scores ``s_ij = x_iᵀ A x_j``, shape (N, N)."""
    return X @ A @ X.T


def softmax_kernel(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Attention weights ``rowsoftmax(x_iᵀ A x_j)`` (max-subtracted), shape (N, N)."""
    s = kernel_scores(X, A)
    with np.errstate(under="ignore"):
        e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_partition(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``log z_i = log Σ_j e^{x_iᵀ A x_j}`` by log-sum-exp, shape (N,)."""
    s = kernel_scores(X, A)
    m = s.max(axis=1)
    with np.errstate(under="ignore"):
        return m + np.log(np.exp(s - m[:, None]).sum(axis=1))


def scaled_exp(E: np.ndarray):
    """Shared-scale exponentials: ``e^{E} = e^{m} · W`` with ``W = e^{E − m}``, ``m = max E``.

    Parameters
    ----------
    E : ndarray, shape (N, N)
        Exponents.

    Returns
    -------
    W : ndarray, shape (N, N)
        Entries in ``[0, 1]``, never overflowing.
    m : float
        The shared scale.
    """
    m = float(np.max(E))
    with np.errstate(under="ignore"):
        return np.exp(E - m), m


def _exp(x: float) -> float:
    """``e^x``, ``inf`` (without a floating-point error) when not representable."""
    return float(np.exp(x)) if x < 709.0 else np.inf


#: Largest gap between the bound ``b_i`` of :func:`softmax_velocity` and the known
#: score ``s_ii``; beyond it the exact row maxima are taken.
_BOUND_GAP = 50.0


def softmax_velocity(X: np.ndarray, A: np.ndarray, V: np.ndarray,
                     work: Workspace | None = None, *, spd: bool = False) -> np.ndarray:
    """First-order softmax flow ``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``, shape (N, d).

    Two products and one exponential over the N×N weights: the shifted scores
    ``s_ij − b_i = [x_iᵀA, −b_i]·[x_j, 1]`` come out of one product, and
    ``[Σ_j e_ij V x_j, Σ_j e_ij]`` (numerators and row sums) out of the other. When
    ``A`` is known to be symmetric positive definite (``spd=True``, as the engine's
    kernels are), ``b_i = √(a_i) max_j √(a_j)`` with
    ``a_i = x_iᵀ A x_i`` bounds the row (Cauchy–Schwarz), so nothing overflows, and
    the row holds ``s_ii = a_i ≥ b_i − gap``, so nothing important underflows while
    the gap is small; otherwise (or for another ``A``) the exact row maxima are used.
    ``work`` keeps the N×N buffer between calls.
    """
    n, d = X.shape
    XA = X @ A
    L = np.empty((n, d + 1))
    L[:, :d] = XA
    R = np.empty((n, d + 1))
    R[:, :d] = X
    R[:, d] = 1.0
    exact = True
    if spd:
        root = np.sqrt(np.maximum(np.vecdot(XA, X), 0.0))
        a = root * root
        b = root * root.max()
        if float((b - a).max()) <= _BOUND_GAP:
            L[:, d] = -b
            exact = False
    if exact:
        L[:, d] = 0.0
    E = np.matmul(L, R.T, out=None if work is None else work.get("softmax.E", (n, n)))
    if exact:
        E -= E.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        np.exp(E, out=E)
    R[:, :d] = X @ V
    out = E @ R
    return out[:, :d] / out[:, d:]


def inertial_velocity(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                      B: np.ndarray) -> np.ndarray:
    """``ẋ_i = N B y_i / z_i = ∂H/∂y_i`` (MODEL.md §13), shape (N, d)."""
    with np.errstate(under="ignore"):
        inv_z = np.exp(-log_partition(X, A))
        return X.shape[0] * (Y @ B) * inv_z[:, None]


def inertial_force(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                   B: np.ndarray) -> np.ndarray:
    """Conservative force ``(N/2) Σ_j e^{x_iᵀ A x_j} (r_i + r_j + 2) A x_j``, shape (N, d).

    Split as ``(r_i + 2) Σ_j e^{s_ij} A x_j + Σ_j e^{s_ij − 2 log z_j} q_j A x_j``, each
    sum with its own shared scale.
    """
    n = X.shape[0]
    s = kernel_scores(X, A)
    logz = log_partition(X, A)
    q = np.einsum("ij,jk,ik->i", Y, B, Y)
    XA = X @ A
    W1, m1 = scaled_exp(s)
    W2, m2 = scaled_exp(s - 2.0 * logz[None, :])
    sum1 = W1 @ XA
    sum2 = W2 @ (q[:, None] * XA)
    M = max(m1, m2)  # one overall scale: force = e^M · G with G finite
    with np.errstate(under="ignore"):
        coef1 = q * np.exp(np.minimum(m1 - 2.0 * logz - M, 709.0)) + 2.0 * np.exp(m1 - M)
        G = 0.5 * n * (coef1[:, None] * sum1 + np.exp(m2 - M) * sum2)
    scale = _exp(M)
    if np.isfinite(scale):
        with np.errstate(over="ignore"):
            return G * scale
    return np.copysign(np.where(G == 0, 0.0, np.inf), G)  # not representable


def inertial_field(t: float, X, Y, A, B, alpha: float):
    """``(Ẋ, Ẏ)`` of the inertial softmax system (MODEL.md §13)."""
    return inertial_velocity(X, Y, A, B), -alpha * Y + inertial_force(X, Y, A, B)


def inertial_kinetic(X, Y, A, B) -> float:
    """``(N/2) Σ_i y_iᵀ B y_i / z_i`` (the ``y``-dependent part of ``H``)."""
    q = np.einsum("ij,jk,ik->i", Y, B, Y)
    with np.errstate(under="ignore"):
        return 0.5 * X.shape[0] * float(np.sum(q * np.exp(-log_partition(X, A))))


def inertial_potential(X, A) -> float:
    """``−(N/2) Σ_ij e^{x_iᵀ A x_j} = −(N/2) Σ_i z_i`` (``−inf`` if not representable)."""
    logz = log_partition(X, A)
    m = float(logz.max())
    with np.errstate(under="ignore"):
        return -0.5 * X.shape[0] * _exp(m) * float(np.sum(np.exp(logz - m)))


def inertial_hamiltonian(X, Y, A, B) -> float:
    """``H = (N/2) [Σ_i y_iᵀ B y_i / z_i − Σ_ij e^{x_iᵀ A x_j}]`` (MODEL.md §13)."""
    return inertial_kinetic(X, Y, A, B) + inertial_potential(X, A)


def inertial_dissipation(X, Y, A, B) -> float:
    """``N Σ_i y_iᵀ B y_i / z_i``; ``dH/dt = −α`` times this (MODEL.md §13)."""
    return 2.0 * inertial_kinetic(X, Y, A, B)


def momentum_field(t: float, X, Y, A, V, alpha: float):
    """Momentum-only control ``ẋ_i = y_i``, ``ẏ_i = −α y_i + v_i(X)`` (MODEL.md §13)."""
    return Y, -alpha * Y + softmax_velocity(X, A, V)
