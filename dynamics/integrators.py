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

import math

import numpy as np
from scipy.linalg.blas import daxpy

from .energy import row_variance, rowsoftmax

ORDER = {"logit_step": 2, "strang": 2, "verlet": 2, "heun": 2}


def phi1(x):
    """``(1 − e^{−x})/x``, stable for small ``x ≥ 0``."""
    return 1.0 - x / 2.0 + x * x / 6.0 if x < 1e-4 else -math.expm1(-x) / x


def psi(x):
    """``ψ(x) = 1 − (1 − e^{−x})/x`` of MODEL.md §3, stable for small ``x ≥ 0``."""
    return x / 2.0 - x * x / 6.0 + x**3 / 24.0 if x < 1e-4 else 1.0 + math.expm1(-x) / x


def centre_rows(Z, out=None):
    """Subtract the row maximum (changes no attention, prevents overflow).

    ``out`` (may be ``Z`` itself) receives the result; a new array otherwise.
    """
    return np.subtract(Z, Z.max(axis=1, keepdims=True), out=out)


def axpy(a, x, y):
    """``y += a x`` in place, in one pass over memory (BLAS axpy on the flat arrays)."""
    if a == 0.0:
        return y
    if (y.size >= _AXPY_MIN_SIZE and x.dtype == y.dtype == np.float64
            and x.flags.c_contiguous and y.flags.c_contiguous and x.shape == y.shape):
        daxpy(x.reshape(-1), y.reshape(-1), a=a)
    else:  # small arrays: two NumPy passes cost less than the BLAS call
        y += a * x
    return y


#: Size from which :func:`axpy` calls BLAS.
_AXPY_MIN_SIZE = 4096


def logit_step(Z, S0, S1, beta, lam, h, out=None):
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
    out : ndarray, shape (N, N), optional
        Receives ``Z₁`` (must not be ``S0`` or ``S1``); a new array otherwise.
    """
    x = lam * h
    E = math.exp(-x)
    b = beta * psi(x)
    c0 = beta * x * phi1(x) - b  # β(1 − E) − βψ
    Z1 = np.multiply(Z, E, out=out)
    if S1 is S0:
        axpy(c0 + b, S0, Z1)
    else:
        axpy(c0, S0, Z1)
        axpy(b, S1, Z1)
    return centre_rows(Z1, out=Z1)


class Workspace:
    """Named scratch arrays, reused from call to call (their contents never outlive a call).

    A step asks for ``work.get(name, shape)``; each function uses its own names, so
    nested calls never share a live buffer. States never hold a workspace array.
    """

    def __init__(self):
        self._arrays = {}

    def get(self, name, shape):
        a = self._arrays.get(name)
        if a is None or a.shape != shape:
            a = self._arrays[name] = np.empty(shape)
        return a


def relaxation_averages(Z, S_hat, beta, lam, tau, A0=None, lag=None, *, W0=None, D0=None,
                        mean_A=True, work=None, out=None):
    """Attention and dissipation along a relaxation of duration ``τ`` with frozen ``Ŝ``.

    The exact solution is ``Z(s) = βŜ + L + u W₀`` with ``u = e^{−λs}``,
    ``W₀ = Z − βŜ − L`` and ``L`` the steady lag (0 unless given), and the
    dissipation rate along it is ``D = (λ/β) Σ_i Var_{A_i}(L_i + u W₀_i)``. A time average becomes
    ``⟨g⟩ = g_E + (1/λτ) ∫_E^1 (g(u) − g_E)/u du`` (``E = e^{−λτ}``), whose integrand
    is smooth for any ``λτ``; composite Simpson's rule in ``u`` integrates it. One
    panel serves while attention stays near its target; far from it (a stiff step
    from a distant start) the panels grow with ``(1 − E)·max osc(W₀)`` (at most 32).

    Parameters
    ----------
    Z, S_hat : ndarray, shape (N, N)
        Logits at the start and the frozen effective scores.
    beta, lam, tau : float
    A0 : ndarray, shape (N, N), optional
        ``rowsoftmax(Z)`` when known.
    lag : ndarray, shape (N, N), optional
        The steady lag ``L``.
    W0 : ndarray, shape (N, N), optional
        ``Z − βŜ − L`` up to row constants, when known.
    D0 : float, optional
        The dissipation rate at the start, when known.
    mean_A : bool
        ``False`` skips the time average of attention (returned as ``None``).
    work : Workspace, optional
        Scratch arrays.
    out : tuple of two ndarrays, optional
        Receive ``Z_end`` and ``A_end``; new arrays otherwise.

    Returns
    -------
    Z_end, A_end : ndarray, shape (N, N)
        Logits and attention after the relaxation.
    mean_A : ndarray, shape (N, N) or None
        Time average of the attention over the relaxation.
    D_start, D_end, mean_D : float
        Dissipation rate at both ends and its time average.
    """
    work = Workspace() if work is None else work
    shape = Z.shape
    rate = lam / beta
    if W0 is None:  # Z − βŜ − L (no centring needed: every use ignores row constants)
        W0 = np.multiply(S_hat, -beta, out=work.get("relax.W0", shape))
        W0 += Z
        if lag is not None:
            W0 -= lag
    x = lam * tau
    E = math.exp(-x)
    spread = (1.0 - E) * float(np.max(W0.max(axis=1) - W0.min(axis=1)))
    panels = int(min(32, max(1, math.ceil(spread / 1.5))))
    u = np.linspace(E, 1.0, 2 * panels + 1).tolist()
    u[-1] = 1.0
    weights = [1.0] + [4.0 if k % 2 else 2.0 for k in range(1, 2 * panels)] + [1.0]
    scale = phi1(x) / (6.0 * panels)  # (1 − E) / (λτ) × Δu / 3 with Δu = (1 − E)/(2n)
    var_work = work.get("relax.var", shape)

    def rate_at(uk, Ak):
        """``(λ/β) Σ_i Var_{A_i}(L_i + u W₀_i)``."""
        if lag is None:
            return rate * uk * uk * row_variance(Ak, W0, var_work)
        V = work.get("relax.offset", shape)
        np.copyto(V, lag)
        return rate * row_variance(Ak, axpy(uk, W0, V), var_work)

    def sample(uk, Zk, Ak):
        """Logits ``Z − (1 − u) W₀`` (centred) and their attention at ``u``."""
        np.copyto(Zk, Z)
        axpy(uk - 1.0, W0, Zk)
        centre_rows(Zk, out=Zk)
        return rowsoftmax(Zk, centred=True, out=Ak)

    Z_end, A_end = (np.empty(shape), np.empty(shape)) if out is None else out
    sample(u[0], Z_end, A_end)
    D_end = rate_at(u[0], A_end)
    if A0 is None:
        A0 = rowsoftmax(Z)
    D_start = rate_at(1.0, A0) if D0 is None else D0
    coef = [scale * w / uk for w, uk in zip(weights[1:], u[1:], strict=True)]
    mean = None
    if mean_A:
        mean = np.multiply(A_end, 1.0 - sum(coef), out=work.get("relax.mean", shape))
        axpy(coef[-1], A0, mean)
    mean_D = D_end + coef[-1] * (D_start - D_end)
    if len(u) > 2:
        Zk, Ak = work.get("relax.Zk", shape), work.get("relax.Ak", shape)
        for k in range(1, len(u) - 1):
            sample(u[k], Zk, Ak)
            mean_D += coef[k - 1] * (rate_at(u[k], Ak) - D_end)
            if mean_A:
                axpy(coef[k - 1], Ak, mean)
    return Z_end, A_end, mean, D_start, D_end, mean_D


def relax(Z, S_hat, beta, lam, h, A0=None, *, D0=None, work=None, out=None):
    """Relax logits for a time ``h`` with frozen effective scores ``Ŝ``.

    ``D0`` (the dissipation rate at the start), ``work`` and ``out`` are passed to
    :func:`relaxation_averages`.

    Returns
    -------
    Z1, A1 : ndarray, shape (N, N)
        Logits and attention after the relaxation.
    dissipated : float
        ``∫ D ds`` over the relaxation (see :func:`relaxation_averages`).
    """
    Z1, A1, _, _, _, mean_D = relaxation_averages(Z, S_hat, beta, lam, h, A0, D0=D0,
                                                  mean_A=False, work=work, out=out)
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
