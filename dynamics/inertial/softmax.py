"""Softmax attention, first order and inertial (Theory page, Part II: softmax attention).

Kernel ``e^{x_iᵀ A x_j}``, ``B = V A⁻¹`` symmetric positive definite,
``z_i = Σ_j e^{x_iᵀ A x_j}``, ``q_i = y_iᵀ B y_i``, ``r_i = q_i / z_i²``.

* first order: ``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``;
* inertial: ``ẋ_i = N B y_i / z_i``,
  ``ẏ_i = −α y_i + (N/2) Σ_j e^{x_iᵀ A x_j} (r_i + r_j + 2) A x_j``,
  ``H = (N/2) [Σ_i q_i / z_i − Σ_ij e^{x_iᵀ A x_j}]``;
* momentum-only control: ``ẋ_i = y_i``, ``ẏ_i = −α y_i + v_i(X)`` with ``v`` the
  first-order velocity.

The models' fields (with the damping) are assembled in :mod:`dynamics.models`.

The raw exponentials matter (the inertial field is not invariant under row shifts of
the scores), so they are never formed directly: every sum ``Σ_j e^{e_ij} w_j`` is
evaluated as ``e^{m} Σ_j e^{e_ij − m} w_j`` with a shared scale ``m = max e_ij`` and
``log z_i`` by a log-sum-exp. The bounded sums never overflow; only the final scalar
factor ``e^{m}`` can, and then the true value is not representable (``inf``).
"""

from __future__ import annotations

import numpy as np

from ..workspace import Workspace


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


def _shifted_exponentials(X: np.ndarray, XA: np.ndarray, work: Workspace | None, name: str,
                          *, spd: bool):
    """``E_ij = e^{s_ij − b_i}`` for the scores ``s_ij = x_iᵀ A x_j`` (``XA = X A``) and
    the row shifts ``b`` (N,), from one product: ``s_ij − b_i = [x_iᵀA, −b_i]·[x_j, 1]``.

    When ``A`` is known to be symmetric positive definite (``spd=True``),
    ``b_i = √(a_i) max_j √(a_j)`` with ``a_i = x_iᵀ A x_i`` bounds the row
    (Cauchy–Schwarz), so nothing overflows, and the row holds ``s_ii = a_i ≥ b_i − gap``,
    so nothing important underflows while the gap is small; otherwise (or for another
    ``A``) the exact row maxima are used. ``work`` keeps the N×N buffer under ``name``.
    """
    n, d = X.shape
    L = np.empty((n, d + 1))
    L[:, :d] = XA
    R = np.empty((n, d + 1))
    R[:, :d] = X
    R[:, d] = 1.0
    exact = True
    if spd:
        root = np.sqrt(np.maximum(np.vecdot(XA, X), 0.0))
        b = root * root.max()
        if float((b - root * root).max()) <= _BOUND_GAP:
            L[:, d] = -b
            exact = False
    if exact:
        L[:, d] = 0.0
    E = np.matmul(L, R.T, out=None if work is None else work.get(name, (n, n)))
    if exact:
        b = E.max(axis=1)
        E -= b[:, None]
    with np.errstate(under="ignore"):
        np.exp(E, out=E)
    return E, b


def softmax_velocity(X: np.ndarray, A: np.ndarray, V: np.ndarray,
                     work: Workspace | None = None, *, spd: bool = False) -> np.ndarray:
    """First-order softmax flow ``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``, shape (N, d),
    for any ``A`` and ``V``.

    Two products and one exponential over the N×N weights: the shifted exponentials
    of :func:`_shifted_exponentials` (``spd=True`` only for a symmetric positive definite
    ``A``), and ``[Σ_j e_ij V x_j, Σ_j e_ij]`` (numerators and row sums) out of the
    other. ``work`` keeps the N×N buffer between calls.
    """
    n, d = X.shape
    E, _ = _shifted_exponentials(X, X @ A, work, "softmax.E", spd=spd)
    R = np.empty((n, d + 1))
    R[:, :d] = X @ np.ascontiguousarray(V.T)  # rows (V x_j)ᵀ; = X @ V for V = Vᵀ
    R[:, d] = 1.0
    out = E @ R
    return out[:, :d] / out[:, d:]


def _inertial_partition(X, Y, A, B, work):
    """``(XA, E, b, log z, q, 1/z, Y B)`` of the inertial model at ``(X, Y)``: one score
    product and one exponential (``A`` is SPD, so ``z_i ≥ e^{a_i} ≥ 1``)."""
    XA = X @ A
    E, b = _shifted_exponentials(X, XA, work, "inertial.E", spd=True)
    logz = np.log(E @ np.ones(X.shape[0]))
    logz += b
    YB = Y @ B
    q = np.vecdot(YB, Y)
    with np.errstate(under="ignore"):
        inv_z = np.exp(-logz)
    return XA, E, b, logz, q, inv_z, YB


def inertial_parts(X: np.ndarray, Y: np.ndarray, A: np.ndarray, B: np.ndarray,
                   work: Workspace | None = None):
    """:func:`inertial_velocity` and :func:`inertial_force` at once, from one score product,
    one exponential and one product of width 2d (``A`` symmetric positive definite):

        ``F_i = (N/2) e^{b_i} [(r_i + 2) Σ_j E_ij A x_j + Σ_j E_ij r_j A x_j]``

    with ``E_ij = e^{s_ij − b_i} ≤ 1`` and ``r = q / z² ≤ q`` (``z ≥ 1``); the row scales
    ``e^{b_i}`` are brought to one ``e^{max b}``, which alone can overflow (then the
    force is ``±inf`` where it is not zero, as :func:`inertial_force` gives).
    ``work`` keeps the N×N buffer between calls.

    Returns
    -------
    velocity, force : ndarray, shape (N, d)
    """
    n, d = X.shape
    with np.errstate(under="ignore"):  # tiny weights and 1/z: negligible terms
        XA, E, b, logz, q, inv_z, YB = _inertial_partition(X, Y, A, B, work)
        velocity = YB
        velocity *= n * inv_z[:, None]
        r = q * inv_z
        r *= inv_z
        R = np.empty((n, 2 * d))
        R[:, :d] = XA
        np.multiply(XA, r[:, None], out=R[:, d:])
        UV = E @ R
        G = UV[:, :d]
        G *= (r + 2.0)[:, None]
        G += UV[:, d:]
        M = float(b.max())
        G *= (0.5 * n) * np.exp(b - M)[:, None]
    scale = _exp(M)
    if np.isfinite(scale):
        with np.errstate(over="ignore"):
            return velocity, G * scale
    return velocity, np.copysign(np.where(G == 0, 0.0, np.inf), G)


def inertial_energies(X: np.ndarray, Y: np.ndarray, A: np.ndarray, B: np.ndarray,
                      work: Workspace | None = None) -> tuple[float, float, float]:
    """:func:`inertial_hamiltonian`, :func:`inertial_kinetic` and
    :func:`inertial_dissipation` at once, from one score product and one exponential."""
    n = X.shape[0]
    with np.errstate(under="ignore"):
        _, _, _, logz, q, inv_z, _ = _inertial_partition(X, Y, A, B, work)
        kinetic = 0.5 * n * float(np.vecdot(q, inv_z))
    return kinetic + _potential(logz, n), kinetic, 2.0 * kinetic


def _potential(logz: np.ndarray, n: int) -> float:
    """``−(N/2) Σ_i z_i`` from ``log z`` (``−inf`` if not representable)."""
    m = float(logz.max())
    with np.errstate(under="ignore"):
        return -0.5 * n * _exp(m) * float(np.sum(np.exp(logz - m)))


def inertial_velocity(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                      B: np.ndarray) -> np.ndarray:
    """``ẋ_i = N B y_i / z_i = ∂H/∂y_i`` shape (N, d)."""
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


def inertial_kinetic(X, Y, A, B) -> float:
    """``(N/2) Σ_i y_iᵀ B y_i / z_i`` (the ``y``-dependent part of ``H``)."""
    q = np.einsum("ij,jk,ik->i", Y, B, Y)
    with np.errstate(under="ignore"):
        return 0.5 * X.shape[0] * float(np.sum(q * np.exp(-log_partition(X, A))))


def inertial_potential(X, A) -> float:
    """``−(N/2) Σ_ij e^{x_iᵀ A x_j} = −(N/2) Σ_i z_i`` (``−inf`` if not representable)."""
    return _potential(log_partition(X, A), X.shape[0])


def inertial_hamiltonian(X, Y, A, B) -> float:
    """``H = (N/2) [Σ_i y_iᵀ B y_i / z_i − Σ_ij e^{x_iᵀ A x_j}]``."""
    return inertial_kinetic(X, Y, A, B) + inertial_potential(X, A)


def inertial_dissipation(X, Y, A, B) -> float:
    """``N Σ_i y_iᵀ B y_i / z_i``; ``dH/dt = −α`` times this."""
    return 2.0 * inertial_kinetic(X, Y, A, B)
