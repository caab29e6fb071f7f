"""Fixed-step integrators (MODEL.md §3 and Part III).

* :func:`logit_step` — the exact exponential logit step of §3 (exact for scores
  linear in time over the step; order 2 otherwise).
* :func:`relax` — the same step with frozen (effective) scores, which also returns
  the energy it dissipates, integrated by composite Simpson's rule in
  ``u = e^{−λs}``: accurate for any ``λh`` (stiff-safe).
* :func:`verlet` and :func:`heun` — order-2 steps for the features with attention
  frozen; the coupled models compose them with :func:`relax` by Strang splitting.

Each stepper declares its order in :data:`ORDER`; the tests measure it.
"""

from __future__ import annotations

import numpy as np

from .energy import row_variance, rowsoftmax

ORDER = {"logit_step": 2, "strang": 2, "verlet": 2, "heun": 2}


def phi1(x):
    """``(1 − e^{−x})/x``, stable for small ``x ≥ 0``."""
    return 1.0 - x / 2.0 + x * x / 6.0 if x < 1e-4 else -np.expm1(-x) / x


def psi(x):
    """``ψ(x) = 1 − (1 − e^{−x})/x`` of MODEL.md §3, stable for small ``x ≥ 0``."""
    return x / 2.0 - x * x / 6.0 + x**3 / 24.0 if x < 1e-4 else 1.0 + np.expm1(-x) / x


def centre_rows(Z):
    """Subtract the row maximum (changes no attention, prevents overflow)."""
    return Z - Z.max(axis=1, keepdims=True)


def logit_step(Z, S0, S1, beta, lam, h):
    """Exact logit step of §3 over ``[t, t+h]`` with scores ``S0 → S1`` linear in time.

    ``Z₁ = E Z₀ + β(1 − E) S₀ + β ψ(λh) (S₁ − S₀)``, ``E = e^{−λh}``.

    Parameters
    ----------
    Z : ndarray, shape (N, N)
        Logits at ``t``.
    S0, S1 : ndarray, shape (N, N)
        Scores at ``t`` and ``t + h``.
    beta, lam, h : float
        β, λ = γ/β and the step.
    """
    x = lam * h
    E = np.exp(-x)
    return centre_rows(E * Z + beta * (x * phi1(x)) * S0 + beta * psi(x) * (S1 - S0))


def relax(Z, S_hat, beta, lam, h, A0=None):
    """Relax logits for a time ``h`` with frozen effective scores ``Ŝ``.

    The exact solution is ``Z(s) = βŜ + u W₀`` with ``u = e^{−λs}`` and
    ``W₀ = Z − βŜ``. The dissipation rate along it is
    ``D = (λ/β) u² Σ_i Var_{A_i}(W₀_i)`` so
    ``∫₀ʰ D ds = (1/β) ∫_E^1 u V(u) du``, ``V(u) = Σ_i Var_{A(u)_i}(W₀_i)``, which
    composite Simpson's rule in ``u`` integrates for any ``λh``. One panel serves
    while attention stays near its target; far from it (a stiff step from a
    distant start) the panels grow with ``(1 − E)·max osc(W₀)`` (at most 32).

    Returns
    -------
    Z1 : ndarray, shape (N, N)
        Logits after the relaxation.
    A1 : ndarray, shape (N, N)
        ``rowsoftmax(Z1)``.
    dissipated : float
        ``∫ D ds`` over the relaxation.
    """
    W0 = centre_rows(Z - beta * S_hat)
    E = np.exp(-lam * h)
    A0 = rowsoftmax(Z) if A0 is None else A0
    Z1 = centre_rows(beta * S_hat + E * W0)
    A1 = rowsoftmax(Z1)
    spread = (1.0 - E) * float(np.max(W0.max(axis=1) - W0.min(axis=1)))
    panels = int(min(32, max(1, np.ceil(spread / 1.5))))
    u = np.linspace(E, 1.0, 2 * panels + 1)
    total = E * row_variance(A1, W0) + row_variance(A0, W0)
    for k in range(1, 2 * panels):
        weight = 4.0 if k % 2 else 2.0
        total += weight * u[k] * row_variance(rowsoftmax(beta * S_hat + u[k] * W0), W0)
    return Z1, A1, (1.0 - E) / (6.0 * panels) * total / beta


def exp_trapezoid(lam, h):
    """Weights ``(w0, w1)`` with ``∫₀ʰ e^{−λ(h−s)} q(s) ds = w0 q(0) + w1 q(h)`` for linear q."""
    x = lam * h
    chi = 0.5 - x / 6.0 + x * x / 24.0 if x < 1e-4 else psi(x) / x
    return h * (phi1(x) - chi), h * chi


def verlet(X, P, force, mass, h):
    """Velocity Verlet for ``Ẋ = P/m, Ṗ = force(X)``; symplectic, order 2."""
    P_half = P + 0.5 * h * force(X)
    X1 = X + (h / mass) * P_half
    return X1, P_half + 0.5 * h * force(X1)


def heun(y, rhs, h):
    """Heun's method (explicit trapezoid), order 2, for ``ẏ = rhs(y)``."""
    k1 = rhs(y)
    k2 = rhs(tuple(a + h * b for a, b in zip(y, k1)))
    return tuple(a + 0.5 * h * (b + c) for a, b, c in zip(y, k1, k2))
