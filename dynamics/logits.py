"""The exact logit step and its helpers (Theory page: "Logits and the exact step").

* :func:`logit_step` — the exact exponential step of ``dZ/dt = γS − λZ`` over one step,
  exact for scores linear in time (order 2 otherwise).
* :func:`exp_trapezoid` — weights of ``∫ e^{−λ(h−s)} q(s) ds`` for linear ``q`` (the
  tracking bound's update); :func:`exp_quadratic` for quadratic ``q`` (its stiff steps).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import daxpy

from .energy import _max_reduce, row_variance


def phi1(x):
    """``(1 − e^{−x})/x``, stable for small ``|x|`` (a backward step has ``x < 0``)."""
    return 1.0 - x / 2.0 + x * x / 6.0 if abs(x) < 1e-4 else -math.expm1(-x) / x


def psi(x):
    """``ψ(x) = 1 − (1 − e^{−x})/x`` of the exact logit step, stable for small ``|x|``."""
    return x / 2.0 - x * x / 6.0 + x**3 / 24.0 if abs(x) < 1e-4 else 1.0 + math.expm1(-x) / x


def centre_rows(Z, out=None):
    """Subtract the row maximum (changes no attention, prevents overflow).

    ``out`` (may be ``Z`` itself) receives the result; a new array otherwise.
    """
    return np.subtract(Z, _max_reduce(Z, 1, keepdims=True), out=out)


def axpy(a, x, y):
    """``y += a x`` in place, in one pass over memory (BLAS axpy on the flat arrays)."""
    if a == 0.0:
        return y
    if y.size < _AXPY_MIN_SIZE:  # small arrays: two NumPy passes cost less than BLAS
        y += a * x
    elif (x.dtype == y.dtype == np.float64 and x.flags.c_contiguous
          and y.flags.c_contiguous and x.shape == y.shape):
        daxpy(x.reshape(-1), y.reshape(-1), a=a)
    else:
        y += a * x
    return y


#: Size from which :func:`axpy` calls BLAS.
_AXPY_MIN_SIZE = 4096


def logit_coefficients(beta, lam, h):
    """``(E, c₀, b)`` of :func:`logit_step`: ``Z₁ = E Z₀ + c₀ S₀ + b S₁`` before centring."""
    x = lam * h
    b = beta * psi(x)
    return math.exp(-x), beta * x * phi1(x) - b, b  # c₀ = β(1 − E) − βψ


def logit_step(Z, S0, S1, beta, lam, h, out=None, coef=None):
    """Exact logit step over ``[t, t+h]`` with scores ``S0 → S1`` linear in time.

    ``Z₁ = E Z₀ + β(1 − E) S₀ + β ψ(λh) (S₁ − S₀)``, ``E = e^{−λh}``.

    Parameters
    ----------
    Z : ndarray, shape (N, N)
        Logits at ``t``.
    S0, S1 : ndarray, shape (N, N)
        Scores at ``t`` and ``t + h``.
    beta, lam, h : float
        β, λ = γ/β and the step.
    out : ndarray, shape (N, N), optional
        Receives ``Z₁`` (must not be ``S0`` or ``S1``); a new array otherwise.
    coef : tuple, optional
        ``logit_coefficients(beta, lam, h)`` when known (a caller stepping with a fixed h).
    """
    E, c0, b = logit_coefficients(beta, lam, h) if coef is None else coef
    Z1 = np.multiply(Z, E, out=out)
    if S1 is S0:
        axpy(c0 + b, S0, Z1)
    else:
        axpy(c0, S0, Z1)
        axpy(b, S1, Z1)
    return centre_rows(Z1, out=Z1)


def exp_trapezoid(lam, h):
    """Weights ``(w0, w1)`` with ``∫₀ʰ e^{−λ(h−s)} q(s) ds = w0 q(0) + w1 q(h)`` for linear q."""
    x = lam * h
    chi = 0.5 - x / 6.0 + x * x / 24.0 if abs(x) < 1e-4 else psi(x) / x
    return h * (phi1(x) - chi), h * chi


def exp_quadratic(lam, h):
    """Weights ``(w₋₁, w₀, w₁)`` with ``∫₀ʰ e^{−λ(h−s)} q(s) ds = w₋₁ q(−h) + w₀ q(0) + w₁ q(h)``
    for quadratic q: the tracking bound's update on a stiff step, from the previous step's
    value as well. There the bound is ``(q − q′/λ + …)/λ``; the linear rule of
    :func:`exp_trapezoid` takes ``q′`` at the step's middle and errs by ``h q″/(2λ²)``."""
    x = lam * h
    if abs(x) < 1e-2:  # series of the moments ∫₀¹ e^{−xτ} τ^k dτ, k = 0, 1, 2
        m0 = 1.0 - x / 2.0 + x * x / 6.0 - x**3 / 24.0
        nu1 = 0.5 - x / 3.0 + x * x / 8.0 - x**3 / 30.0
        nu2 = 1.0 / 3.0 - x / 4.0 + x * x / 10.0 - x**3 / 36.0
    else:
        E = math.exp(-x)
        m0 = -math.expm1(-x) / x
        nu1 = (1.0 - E * (1.0 + x)) / (x * x)
        nu2 = (2.0 - E * (x * x + 2.0 * x + 2.0)) / x**3
    m1, m2 = m0 - nu1, m0 - 2.0 * nu1 + nu2  # ∫₀¹ e^{−x(1−σ)} σ^k dσ
    return 0.5 * h * (m2 - m1), h * (m0 - m2), 0.5 * h * (m2 + m1)


def logit_dissipation_rate(A, Z, S, beta, lam, work):
    """Dissipation rate ``D = (λ/β) Σ_i Var_{A_i}(Z_i − βS_i)`` in logit form, shape () —
    the same ``D`` as ``γ Σ_i Var_{A_i}(C_i)`` with ``A = rowsoftmax(Z)``.

    ``work`` is a :class:`~dynamics.workspace.Workspace` for two (N, N) scratch arrays.
    """
    W = work.get("rate.W", Z.shape)
    if beta == 1.0:
        np.subtract(Z, S, out=W)
    else:
        np.multiply(S, -beta, out=W)
        W += Z
    return lam / beta * row_variance(A, W, work.get("rate.var", Z.shape))
