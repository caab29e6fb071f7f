"""The exact logit step and its helpers (Theory page: "The Fisher–Rao attention flow").

* :func:`logit_step` — the exact exponential step of ``dZ/dt = γS − λZ`` over one step,
  exact for scores linear in time (order 2 otherwise).
* :func:`hermite_logit_step` — the same for scores cubic in time (values and rates at both
  ends): the stiff steps of the attention model.
* :func:`exp_trapezoid` — weights of ``∫ e^{−λ(h−s)} q(s) ds`` for linear ``q`` (the
  tracking bound's update); :func:`exp_quadratic` for quadratic ``q`` (its stiff steps).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import daxpy

from .energy import max_reduce, row_variance


def phi1(x):
    """``(1 − e^{−x})/x``, stable for small ``|x|`` (a backward step has ``x < 0``)."""
    return 1.0 - x / 2.0 + x * x / 6.0 if abs(x) < 1e-4 else -math.expm1(-x) / x


def psi(x):
    """``ψ(x) = 1 − (1 − e^{−x})/x`` of the exact logit step, stable for small ``|x|``."""
    return x / 2.0 - x * x / 6.0 + x**3 / 24.0 if abs(x) < 1e-4 else 1.0 + math.expm1(-x) / x


def centre_rows(Z, out=None):
    """Subtract the row maximum (changes no attention, prevents overflow); rows are the
    last axis, so a stack of logit matrices (one per head) is centred matrix by matrix.

    ``out`` (may be ``Z`` itself) receives the result; a new array otherwise.
    """
    return np.subtract(Z, max_reduce(Z, -1, keepdims=True), out=out)


def axpy(a, x, y):
    """``y += a x`` in place, in one pass over memory (BLAS axpy on the flat arrays)."""
    if a == 0.0:
        return y
    if y.size < AXPY_MIN_SIZE:  # small arrays: two NumPy passes cost less than BLAS
        y += a * x
    elif (x.dtype == y.dtype == np.float64 and x.flags.c_contiguous
          and y.flags.c_contiguous and x.shape == y.shape):
        daxpy(x.reshape(-1), y.reshape(-1), a=a)
    else:
        y += a * x
    return y


#: Size from which :func:`axpy` calls BLAS.
AXPY_MIN_SIZE = 4096


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


def exp_moments(x, n=4):
    """``m_k = ∫₀¹ e^{−x(1−σ)} σ^k dσ`` for ``k < n``: by their series below ``x = 1``
    (``Σ_j (−x)^j k!/(k+j+1)!``), else by ``m_k = (1 − k m_{k−1})/x`` (stable there)."""
    if x < 1.0:
        out = []
        for k in range(n):
            term = math.factorial(k) / math.factorial(k + 1)  # j = 0
            total, j = term, 0
            while abs(term) > 1e-17 * abs(total):
                j += 1
                term *= -x / (k + j + 1)
                total += term
            out.append(total)
        return out
    out = [-math.expm1(-x) / x]
    for k in range(1, n):
        out.append((1.0 - k * out[-1]) / x)
    return out


def hermite_logit_weights(lam, h):
    """``(E, a₀, a₁, b₀, b₁)`` with ``λ∫₀ʰ e^{−λ(h−s)} q(s) ds = a₀ q(0) + a₁ q(h) + b₀ q′(0)
    + b₁ q′(h)`` for cubic ``q`` (Hermite interpolation of the scores between both ends):
    the logit step ``Z₁ = E Z₀ + β(a₀S₀ + a₁S₁ + b₀Ṡ₀ + b₁Ṡ₁)`` is then exact for scores
    cubic in time, where the linear one lags by ``β S̈ (h/(2λ) − 1/λ²)`` on a stiff step."""
    x = lam * h
    m0, m1, m2, m3 = exp_moments(x)
    h00 = 2.0 * m3 - 3.0 * m2 + m0
    h10 = m3 - 2.0 * m2 + m1
    h01 = -2.0 * m3 + 3.0 * m2
    h11 = m3 - m2
    return math.exp(-x), x * h00, x * h01, x * h * h10, x * h * h11


def hermite_logit_step(Z, S0, S1, S0_dot, S1_dot, beta, lam, h):
    """Exact logit step over ``[t, t+h]`` with scores cubic in time (their Hermite
    interpolation from the values and rates at both ends):
    ``Z₁ = E Z₀ + β(a₀S₀ + a₁S₁ + b₀Ṡ₀ + b₁Ṡ₁)`` (:func:`hermite_logit_weights`), rows
    centred. A stiff step's linear :func:`logit_step` leaves attention lagging by
    ``O(h S̈/λ)``: first order in ``h`` at a fixed relaxation rate.

    Parameters
    ----------
    Z, S0, S1, S0_dot, S1_dot : ndarray, shape (N, N)
        Logits at ``t``; scores and their rates at ``t`` and ``t + h``.
    beta, lam, h : float
    """
    E, a0, a1, b0, b1 = hermite_logit_weights(lam, h)
    Z1 = np.multiply(Z, E)
    axpy(beta * a0, S0, Z1)
    axpy(beta * a1, S1, Z1)
    axpy(beta * b0, S0_dot, Z1)
    axpy(beta * b1, S1_dot, Z1)
    return centre_rows(Z1, out=Z1)


def score_rate(X, X_dot, M, XM=None):
    """``dS/dt = Ẋ M Xᵀ + X M Ẋᵀ``, shape (N, N), as one product of width 2d."""
    XM = X @ M if XM is None else XM
    return np.concatenate((X_dot @ M, XM), axis=1) @ np.concatenate((X, X_dot), axis=1).T
