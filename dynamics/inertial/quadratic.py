"""Momentum on a quadratic: the base case of Part II (Theory page, "Momentum on a
quadratic"; paper 002 §3).

Each token is an independent particle in the quadratic bowl ``f(x) = ½ xᵀ A x``
(``A = Aᵀ ≻ 0`` with eigenvalues ``a_k``, minimum ``f* = 0`` at ``x* = 0``)::

    ẍ + α(t) ẋ + ∇f(x) = 0,   ẋ(0) = 0,   H = ½|ẋ|² + f(x),   dH/dt = −α |ẋ|²

with ``α = c`` (heavy ball) or ``α = r/(t + t0) + c`` (Nesterov), and beside them the
gradient flow ``ẋ = −∇f(x)``. The functions here are the readable physics (``f``,
``∇f``) and the exact answers the tests and the lab compare with, per eigen-coordinate
``x_k`` of ``A``:

* gradient flow: ``x_k(t) = x_k(0) e^{−a_k t}`` (:func:`gradient_flow_solution`);
* heavy ball, the damped oscillator: ``x_k(t) = x_k(0) e^{−ct/2}(cos ωt + (c/2ω) sin ωt)``,
  ``ω² = a_k − c²/4`` (cosh/sinh when ``ω² < 0``; ``(1 + ct/2) e^{−ct/2}`` at the
  critical ``c = 2√a_k``) (:func:`oscillator_solution`);
* Nesterov from ``t0 = 0`` with ``c = 0``: ``x_k(t) = x_k(0) Γ(ν+1) (2/z)^ν J_ν(z)``,
  ``ν = (r − 1)/2``, ``z = √a_k t`` (``r = 3``: ``2 x_k(0) J₁(z)/z``), which is
  ``x_k(0) ₀F₁(; ν + 1; −z²/4)`` (:func:`bessel_solution`);
* the Su–Boyd–Candès rate for ``r ≥ 3``, ``t0 = 0``:
  ``f(x(t)) − f* ≤ (r − 1)² |x₀|² / (2t²)`` (:func:`rate_bound`).

Arrays: tokens ``X`` of shape (N, d) (rows ``x_i``), times ``t`` of shape (T,); solutions
of shape (T, N, d). ``A`` acts on columns (``A x_i``: in row form ``X A``, ``A``
symmetric).
"""

from __future__ import annotations

import numpy as np
from scipy.special import hyp0f1

from .damping import Damping


def objective(X: np.ndarray, A: np.ndarray) -> float:
    """``f(X) = Σ_i ½ x_iᵀ A x_i`` (``f* = 0``), ``X`` of shape (N, d)."""
    return 0.5 * float(np.sum((X @ A) * X))


def gradient(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``∇f(x_i) = A x_i`` for every token, shape (N, d) (``A`` symmetric)."""
    return X @ A


def _eigen(A: np.ndarray, X0: np.ndarray):
    """Eigenvalues ``a`` (d,), eigenvectors ``Q`` (d, d) of ``A`` and ``X0`` in that basis."""
    a, Q = np.linalg.eigh(A)
    return a, Q, X0 @ Q


def _per_coordinate(profile, A: np.ndarray, X0: np.ndarray, t) -> np.ndarray:
    """``X(t)`` of shape (T, N, d) from a profile ``g(a, t)`` (shape (T, d), ``g(a, 0) = 1``)
    applied to each eigen-coordinate of ``X0``."""
    a, Q, Y0 = _eigen(np.asarray(A, float), np.asarray(X0, float))
    g = profile(a[None, :], np.asarray(t, float)[:, None])
    return (Y0[None, :, :] * g[:, None, :]) @ Q.T


def gradient_flow_solution(A: np.ndarray, X0: np.ndarray, t) -> np.ndarray:
    """Gradient flow ``ẋ = −A x``: ``x_k(t) = x_k(0) e^{−a_k t}``, shape (T, N, d)."""
    return _per_coordinate(lambda a, s: np.exp(-a * s), A, X0, t)


def oscillator_profile(a, t, c: float) -> np.ndarray:
    """``x_k(t)/x_k(0)`` of ``ẍ + c ẋ + a x = 0`` from rest (broadcast over ``a`` and ``t``).

    Under-damped (``c² < 4a``): ``e^{−ct/2}(cos ωt + (c/2)·sin(ωt)/ω)``; critical: ``(1 +
    ct/2) e^{−ct/2}``; over-damped (``κ² = c²/4 − a > 0``): ``e^{−ct/2}(cosh κt + (c/2)·
    sinh(κt)/κ)``, written with ``e^{(κ − c/2)t}`` and ``expm1`` so that it neither overflows
    nor cancels near the critical damping.
    """
    a, t = np.broadcast_arrays(np.asarray(a, float), np.asarray(t, float))
    half = 0.5 * c
    disc = half * half - a  # −ω² (under), κ² (over)
    out = np.empty(a.shape)
    with np.errstate(all="ignore"):  # each branch is evaluated where it is taken
        w = np.sqrt(-disc)
        sinc_w = np.where(w * t == 0, t, np.sin(w * t) / np.where(w == 0, 1.0, w))
        under = np.exp(-half * t) * (np.cos(w * t) + half * sinc_w)
        k = np.sqrt(disc)
        slow = -a / (k + half)  # κ − c/2, without cancellation
        fast = np.exp(-2.0 * k * t)
        shk = np.where(k * t == 0, t, -np.expm1(-2.0 * k * t) / np.where(k == 0, 1.0, 2.0 * k))
        over = np.exp(slow * t) * (0.5 * (1.0 + fast) + half * shk)
        critical = (1.0 + half * t) * np.exp(-half * t)
    out[:] = np.where(disc < 0, under, np.where(disc > 0, over, critical))
    return out


def oscillator_solution(A: np.ndarray, X0: np.ndarray, t, c: float) -> np.ndarray:
    """Heavy ball ``ẍ + c ẋ + A x = 0`` from rest, per eigen-coordinate, shape (T, N, d)."""
    return _per_coordinate(lambda a, s: oscillator_profile(a, s, c), A, X0, t)


def bessel_profile(a, t, r: float) -> np.ndarray:
    """``x_k(t)/x_k(0) = Γ(ν+1)(2/z)^ν J_ν(z) = ₀F₁(; ν+1; −z²/4)``, ``ν = (r−1)/2``,
    ``z = √a t``: Nesterov ``ẍ + (r/t) ẋ + a x = 0`` from rest at ``t = 0``."""
    a, t = np.broadcast_arrays(np.asarray(a, float), np.asarray(t, float))
    return hyp0f1(0.5 * (r + 1.0), -0.25 * a * t * t)


def bessel_solution(A: np.ndarray, X0: np.ndarray, t, r: float) -> np.ndarray:
    """Nesterov ``ẍ + (r/t) ẋ + A x = 0`` from rest at ``t = 0`` (``t0 = 0``, ``c = 0``),
    per eigen-coordinate, shape (T, N, d)."""
    return _per_coordinate(lambda a, s: bessel_profile(a, s, r), A, X0, t)


def closed_form(A: np.ndarray, X0: np.ndarray, t, damping: Damping) -> np.ndarray | None:
    """The exact ``X(t)`` (T, N, d) of the damped motion from rest, where one is known:
    constant damping (the oscillator), or Nesterov with ``t0 = 0`` and ``c = 0`` (Bessel);
    None otherwise."""
    if damping.kind == "constant" or damping.r == 0:
        return oscillator_solution(A, X0, t, damping.c)
    if damping.t0 == 0 and damping.c == 0:
        return bessel_solution(A, X0, t, damping.r)
    return None


def rate_bound(r: float, X0: np.ndarray, t) -> np.ndarray:
    """Su–Boyd–Candès: ``f(X(t)) − f* ≤ (r − 1)² ‖X0‖² / (2t²)`` for ``r ≥ 3``, ``t0 = 0``
    (summed over the tokens: ``‖X0‖²`` the squared Frobenius norm), shape (T,)."""
    t = np.asarray(t, float)
    with np.errstate(divide="ignore"):
        return (r - 1.0) ** 2 * float(np.sum(np.asarray(X0, float) ** 2)) / (2.0 * t * t)


__all__ = [
    "bessel_profile", "bessel_solution", "closed_form", "gradient",
    "gradient_flow_solution", "objective", "oscillator_profile", "oscillator_solution",
    "rate_bound",
]
