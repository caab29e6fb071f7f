"""Fixed-step integrators (MODEL.md §3 and Part III).

* :func:`logit_step` — the exact exponential logit step of §3 (exact for scores
  linear in time over the step; order 2 otherwise).
* :func:`relax` — the same step with frozen (effective) scores, which also returns
  the energy it dissipates, integrated by composite Simpson's rule in
  ``u = e^{−λs}``: accurate for any ``λh`` (stiff-safe).
* :func:`relaxation_averages` — time averages of attention and dissipation along a
  frozen relaxation, used to carry fast transients exactly.
* :func:`verlet` and :func:`heun` — order-2 steps for the features.

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
    b = beta * psi(x)
    Z1 = S0 * (beta * x * phi1(x) - b)
    Z1 += b * S1
    Z1 += E * Z
    Z1 -= Z1.max(axis=1, keepdims=True)
    return Z1


def relaxation_averages(Z, S_hat, beta, lam, tau, A0=None, lag=None):
    """Attention and dissipation along a relaxation of duration ``τ`` with frozen ``Ŝ``.

    The exact solution is ``Z(s) = βŜ + L + u W₀`` with ``u = e^{−λs}``,
    ``W₀ = Z − βŜ − L`` and ``L`` the steady lag (0 unless given), and the
    dissipation rate along it is ``D = (λ/β) Σ_i Var_{A_i}(L_i + u W₀_i)``. A time average becomes
    ``⟨g⟩ = g_E + (1/λτ) ∫_E^1 (g(u) − g_E)/u du`` (``E = e^{−λτ}``), whose integrand
    is smooth for any ``λτ``; composite Simpson's rule in ``u`` integrates it. One
    panel serves while attention stays near its target; far from it (a stiff step
    from a distant start) the panels grow with ``(1 − E)·max osc(W₀)`` (at most 32).

    Returns
    -------
    Z_end, A_end : ndarray, shape (N, N)
        Logits and attention after the relaxation.
    mean_A : ndarray, shape (N, N)
        Time average of the attention over the relaxation.
    D_start, D_end, mean_D : float
        Dissipation rate at both ends and its time average.
    """
    target = beta * S_hat if lag is None else beta * S_hat + lag
    offset = 0.0 if lag is None else lag
    W0 = centre_rows(Z - target)
    x = lam * tau
    E = np.exp(-x)
    spread = (1.0 - E) * float(np.max(W0.max(axis=1) - W0.min(axis=1)))
    panels = int(min(32, max(1, np.ceil(spread / 1.5))))
    u = np.linspace(E, 1.0, 2 * panels + 1)
    A = [rowsoftmax(target + uk * W0) for uk in u[:-1]]
    A.append(rowsoftmax(Z) if A0 is None else A0)
    D = [lam / beta * row_variance(Ak, offset + uk * W0) for uk, Ak in zip(u, A, strict=True)]
    weights = np.ones(2 * panels + 1)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    scale = phi1(x) / (6.0 * panels)  # (1 − E) / (λτ) × Δu / 3 with Δu = (1 − E)/(2n)
    mean_A = A[0] + scale * sum(w * (Ak - A[0]) / uk
                                for w, uk, Ak in zip(weights[1:], u[1:], A[1:], strict=True))
    mean_D = D[0] + scale * sum(w * (Dk - D[0]) / uk
                                for w, uk, Dk in zip(weights[1:], u[1:], D[1:], strict=True))
    Z_end = centre_rows(target + E * W0)
    return Z_end, A[0], mean_A, D[-1], D[0], mean_D


def relax(Z, S_hat, beta, lam, h, A0=None):
    """Relax logits for a time ``h`` with frozen effective scores ``Ŝ``.

    Returns
    -------
    Z1, A1 : ndarray, shape (N, N)
        Logits and attention after the relaxation.
    dissipated : float
        ``∫ D ds`` over the relaxation (see :func:`relaxation_averages`).
    """
    Z1, A1, _, _, _, mean_D = relaxation_averages(Z, S_hat, beta, lam, h, A0)
    return Z1, A1, h * mean_D


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
    k2 = rhs(tuple(a + h * b for a, b in zip(y, k1, strict=True)))
    return tuple(a + 0.5 * h * (b + c) for a, b, c in zip(y, k1, k2, strict=True))
