"""Softmax attention, first order and inertial (Theory page, Part II: softmax attention).

Scores ``s_ij = x_iᵀ A x_j``, kernel ``e^{s_ij}``; matrices act on columns (``A x``,
``V x``), so the row form of ``V x_j`` is ``x_jᵀ Vᵀ``.

* first order (any ``A``, ``V``): ``ẋ_i = Σ_j softmax_j(s_ij) V x_j``;
* inertial (``A = Aᵀ``, ``B = V A⁻¹`` symmetric positive definite), in mean-field
  normalisation ``z_i = (1/N) Σ_j e^{s_ij}``, with ``r_i = y_iᵀ B y_i / z_i²``::

      H = ½ Σ_i y_iᵀ B y_i / z_i − (1/2N) Σ_ij e^{s_ij}
      ẋ_i = ∂H/∂y_i = B y_i / z_i
      ẏ_i = −α y_i − ∂H/∂x_i = −α y_i + (1/2N) Σ_j e^{s_ij} (r_i + r_j + 2) A x_j

  energy law ``dH/dt = −α Σ_i y_iᵀ B y_i / z_i ≤ 0``; from ``y(0) = 0`` and large ``α``
  the positions follow the first-order flow on the clock ``τ = t/α`` (``B A = V``);
* momentum-only control: ``ẋ_i = y_i``, ``ẏ_i = −α y_i + v_i(X)`` with ``v`` the
  first-order velocity.

The models' fields (with the damping) are assembled in :mod:`dynamics.models`.

The raw exponentials matter (the inertial field is not invariant under row shifts of
the scores), so they are never formed directly: a sum ``Σ_j e^{s_ij} w_j`` is evaluated
as ``e^{m} Σ_j e^{s_ij − m} w_j`` with a shared scale ``m``, and ``log z_i`` by a
log-sum-exp. The bounded sums never overflow; only the final factor ``e^{m}`` can, and
then the true value is not representable (``±inf``). The momenta grow like ``z_i``; the
quantities that stay moderate are ``u_i = y_i / z_i`` (velocity ``B u_i``,
``r_i = u_iᵀ B u_i``) and ``y_i / √z_i`` (kinetic energy), computed from ``log z``.
"""

from __future__ import annotations

import math

import numpy as np

from ..workspace import Workspace
from .matrices import require_symmetric


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
    """``log Σ_j e^{x_iᵀ A x_j}`` by log-sum-exp (the softmax normaliser), shape (N,)."""
    s = kernel_scores(X, A)
    m = s.max(axis=1)
    with np.errstate(under="ignore"):
        return m + np.log(np.exp(s - m[:, None]).sum(axis=1))


def log_mean_partition(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``log z_i = log((1/N) Σ_j e^{x_iᵀ A x_j})`` (mean-field normalisation), shape (N,)."""
    return log_partition(X, A) - math.log(X.shape[0])


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


def times_exp(G: np.ndarray, m: float) -> np.ndarray:
    """``e^{m} G`` (the overflow guard): ``±inf`` where ``G ≠ 0`` once ``e^{m}`` or the
    product is not representable, never NaN and no floating-point error."""
    scale = _exp(m)
    if np.isfinite(scale):
        with np.errstate(over="ignore"):
            return G * scale
    return np.copysign(np.where(G == 0, 0.0, np.inf), G)


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


# -- inertial softmax attention: the readable terms ---------------------------------------
def check_inertial(A: np.ndarray, B: np.ndarray) -> None:
    """``ValueError`` unless ``A`` and ``B`` are symmetric (the inertial model's ``H``
    sees only their symmetric parts, and its force is written for ``A = Aᵀ``)."""
    require_symmetric(A, "kernel A", "inertial softmax attention")
    require_symmetric(B, "B = V A⁻¹", "inertial softmax attention")


def _per_mean(X, Y, A, power: float) -> np.ndarray:
    """``y_i / z_i^power`` (shape (N, d)) from ``log z``, without forming ``z``."""
    with np.errstate(under="ignore"):
        return Y * np.exp(-power * log_mean_partition(X, A))[:, None]


def inertial_velocity(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                      B: np.ndarray) -> np.ndarray:
    """``ẋ_i = ∂H/∂y_i = B y_i / z_i``, shape (N, d)."""
    check_inertial(A, B)
    with np.errstate(under="ignore"):
        return _per_mean(X, Y, A, 1.0) @ B.T


def inertial_ratios(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                    B: np.ndarray) -> np.ndarray:
    """``r_i = y_iᵀ B y_i / z_i² = u_iᵀ B u_i`` with ``u_i = y_i / z_i``, shape (N,)."""
    with np.errstate(under="ignore"):
        U = _per_mean(X, Y, A, 1.0)
        return np.einsum("ik,kl,il->i", U, B, U)


def inertial_force(X: np.ndarray, Y: np.ndarray, A: np.ndarray,
                   B: np.ndarray) -> np.ndarray:
    """Conservative force ``−∂H/∂x_i = (1/2N) Σ_j e^{s_ij} (r_i + r_j + 2) A x_j``,
    shape (N, d), as ``e^{m}`` times the sum over ``e^{s_ij − m}`` (``m = max s``)."""
    check_inertial(A, B)
    n = X.shape[0]
    W, m = scaled_exp(kernel_scores(X, A))  # e^{s_ij} = e^m W_ij
    r = inertial_ratios(X, Y, A, B)
    with np.errstate(under="ignore"):
        G = ((r[:, None] + r[None, :] + 2.0) * W) @ (X @ A.T) / (2.0 * n)
    return times_exp(G, m)


def inertial_kinetic(X, Y, A, B) -> float:
    """``½ Σ_i y_iᵀ B y_i / z_i`` (the ``y``-dependent part of ``H``)."""
    check_inertial(A, B)
    with np.errstate(under="ignore"):
        W = _per_mean(X, Y, A, 0.5)  # y_i / √z_i
        return 0.5 * float(np.einsum("ik,kl,il->", W, B, W))


def _potential(logz: np.ndarray) -> float:
    """``−½ Σ_i z_i`` from ``log z`` (``−inf`` if not representable)."""
    m = float(logz.max())
    with np.errstate(under="ignore"):
        return -0.5 * _exp(m) * float(np.sum(np.exp(logz - m)))


def inertial_potential(X, A) -> float:
    """``−(1/2N) Σ_ij e^{x_iᵀ A x_j} = −½ Σ_i z_i`` (``−inf`` if not representable)."""
    return _potential(log_mean_partition(X, A))


def inertial_hamiltonian(X, Y, A, B) -> float:
    """``H = ½ Σ_i y_iᵀ B y_i / z_i − (1/2N) Σ_ij e^{x_iᵀ A x_j}``."""
    return inertial_kinetic(X, Y, A, B) + inertial_potential(X, A)


def inertial_dissipation(X, Y, A, B) -> float:
    """``Σ_i y_iᵀ B y_i / z_i = Σ_i y_i·∂H/∂y_i``; ``dH/dt = −α`` times this."""
    return 2.0 * inertial_kinetic(X, Y, A, B)


# -- inertial softmax attention: the fused kernels of the stepper -------------------------
def _inertial_partition(X, A, work, spd):
    """``(XA, E, b, log z)``: one score product and one exponential (``A`` symmetric),
    ``E_ij = e^{s_ij − b_i}``, ``log z_i = b_i + log Σ_j E_ij − log N``."""
    XA = X @ A
    E, b = _shifted_exponentials(X, XA, work, "inertial.E", spd=spd)
    logz = np.log(E @ np.ones(X.shape[0]))
    logz += b - math.log(X.shape[0])
    return XA, E, b, logz


def inertial_parts(X: np.ndarray, Y: np.ndarray, A: np.ndarray, B: np.ndarray,
                   work: Workspace | None = None, *, spd: bool = True):
    """:func:`inertial_velocity` and :func:`inertial_force` at once, from one score
    product, one exponential and one product of width 2d (``A``, ``B`` symmetric, so
    that ``X A`` gives both the scores and the rows ``(A x_j)ᵀ``; ``spd`` as in
    :func:`softmax_velocity`):

        ``F_i = (1/2N) e^{b_i} [(r_i + 2) Σ_j E_ij A x_j + Σ_j E_ij r_j A x_j]``

    with ``E_ij = e^{s_ij − b_i} ≤ 1``, ``u_i = y_i / z_i``, velocity ``B u_i`` and
    ``r_i = u_iᵀ B u_i``; the row scales ``e^{b_i}`` are brought to one ``e^{max b}``,
    which alone can overflow (then the force is ``±inf`` where it is not zero, as
    :func:`inertial_force` gives). ``work`` keeps the N×N buffer between calls.

    Returns
    -------
    velocity, force : ndarray, shape (N, d)
    """
    n, d = X.shape
    with np.errstate(under="ignore"):  # tiny weights and 1/z: negligible terms
        XA, E, b, logz = _inertial_partition(X, A, work, spd)
        U = Y * np.exp(-logz)[:, None]
        velocity = U @ B
        r = np.vecdot(velocity, U)
        R = np.empty((n, 2 * d))
        R[:, :d] = XA
        np.multiply(XA, r[:, None], out=R[:, d:])
        UV = E @ R
        G = UV[:, :d]
        G *= (r + 2.0)[:, None]
        G += UV[:, d:]
        M = float(b.max())
        G *= (0.5 / n) * np.exp(b - M)[:, None]
    return velocity, times_exp(G, M)


def inertial_measures(X: np.ndarray, Y: np.ndarray, A: np.ndarray, B: np.ndarray,
                      work: Workspace | None = None, *, spd: bool = True):
    """:func:`inertial_hamiltonian`, :func:`inertial_kinetic`,
    :func:`inertial_dissipation` and the velocity norm ``‖Ẋ‖ = ‖(B y_i / z_i)_i‖``
    (Frobenius) at once, from one score product and one exponential.

    Returns
    -------
    tuple of float
        ``(H, kinetic, Σ_i y_iᵀ B y_i / z_i, ‖Ẋ‖)``.
    """
    with np.errstate(under="ignore"):
        _, _, _, logz = _inertial_partition(X, A, work, spd)
        root = np.exp(-0.5 * logz)[:, None]
        W = Y * root  # y_i / √z_i
        WB = W @ B
        kinetic = 0.5 * float(np.vecdot(WB.ravel(), W.ravel()))
        WB *= root  # B y_i / z_i
        speed = float(np.linalg.norm(WB))
    return kinetic + _potential(logz), kinetic, 2.0 * kinetic, speed


def inertial_energies(X: np.ndarray, Y: np.ndarray, A: np.ndarray, B: np.ndarray,
                      work: Workspace | None = None, *, spd: bool = True):
    """``(H, kinetic, Σ_i y_iᵀ B y_i / z_i)``: the first three of :func:`inertial_measures`."""
    return inertial_measures(X, Y, A, B, work, spd=spd)[:3]
