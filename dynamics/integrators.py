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
import sys

import numpy as np
from scipy.linalg.blas import daxpy

from .energy import _max_reduce, row_variance, rowsoftmax

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


class Workspace:
    """Named scratch arrays, reused from call to call (their contents never outlive a call).

    A step asks for ``work.get(name, shape)``; each function uses its own names, so
    nested calls never share a live buffer. States never hold a workspace array.
    """

    def __init__(self):
        self._arrays = {}
        self._pools = {}
        self.hints = {}  # small values a function keeps from call to call

    def get(self, name, shape):
        a = self._arrays.get(name)
        if a is None or a.shape != shape:
            a = self._arrays[name] = np.empty(shape)
        return a

    def recycled(self, name, shape):
        """A new array for a state to own: one of the pool's earlier arrays that nothing
        else refers to any more (no state, frame, view or caller holds it), else a
        fresh one. Large fresh arrays cost page faults; a recycled one is
        indistinguishable from a fresh one since no one can see its old contents.
        """
        pool = self._pools.setdefault(name, [])
        for i in range(len(pool)):
            # references: the pool's list and getrefcount's argument, nothing else
            if pool[i].shape == shape and sys.getrefcount(pool[i]) <= 2:
                return pool[i]
        a = np.empty(shape)
        if len(pool) < _POOL_SIZE:
            pool.append(a)
        return a


#: Arrays per name that :meth:`Workspace.recycled` keeps (states alive at once).
_POOL_SIZE = 4


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
    spread = (1.0 - math.exp(-x)) * float(np.max(W0.max(axis=1) - W0.min(axis=1)))
    u, coef = _simpson_nodes(x, _simpson_panels(spread))
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


#: Elements of one row block of :func:`relax_to_target` (a few such blocks stay in L2).
_BLOCK_ELEMENTS = 1 << 16
#: A row whose shifted exponentials sum below this is recomputed with its exact maximum.
_TINY_ROW_SUM = 1e-200


def _simpson_panels(spread):
    """Panels of the composite Simpson rule in ``u`` for a relaxation whose logits move
    by ``spread`` = (1 − E)·max osc(W₀): one while near the target, at most 32."""
    return int(min(32, max(1, math.ceil(spread / 1.5))))


def _simpson_nodes(x, panels):
    """Nodes ``u_k`` (``E = e^{−x}`` … 1) and weights ``coef_k`` of the time average in u."""
    E = math.exp(-x)
    u = np.linspace(E, 1.0, 2 * panels + 1).tolist()
    u[-1] = 1.0
    weights = [1.0] + [4.0 if k % 2 else 2.0 for k in range(1, 2 * panels)] + [1.0]
    scale = phi1(x) / (6.0 * panels)  # (1 − E) / x × Δu / 3 with Δu = (1 − E)/(2n)
    return u, [scale * w / uk for w, uk in zip(weights[1:], u[1:], strict=True)]


def relax_to_target(Z, T, beta, lam, tau, A0, *, D0=None, centre=True, work=None, out=None):
    """:func:`relaxation_averages` towards a target ``T = βŜ`` (no lag, no mean of ``A``),
    in one sweep over row blocks.

    Every quantity of the relaxation is row-wise, so each block of rows goes through
    all samples of the quadrature at once, while it stays in cache. The panel count
    depends on the largest row oscillation of ``W = Z − T``, known only at the end of
    the sweep: the sweep assumes the count of the previous call (kept in ``work``) and
    is repeated in the rare case it was wrong, so the quadrature is exactly that of
    :func:`relaxation_averages`.

    ``T`` and ``Z`` must have row maxima at most 0 (and not far below it): every sample
    ``u Z + (1 − u) T`` then has row maxima at most 0 and its exponentials need no
    max-subtraction (a row whose sum underflows is recomputed with its exact maximum).
    The rate along the path is ``(λ/β) u² Var_{A_i}(W_i)``, the variance taken as
    ``E[W²] − E[W]²`` from unnormalised exponentials and their row sums: each row of
    ``W`` takes both signs (0 lies between the maxima of ``Z`` and ``T``), so
    ``|W| ≤ osc(W)`` and the rounding error stays below ``ε osc(W)²``, the order of
    that of the centred two-pass sum.

    Parameters
    ----------
    Z, T : ndarray, shape (N, N)
        Logits at the start and the frozen target ``βŜ``, row maxima at most 0.
    beta, lam, tau : float
    A0 : ndarray, shape (N, N)
        ``rowsoftmax(Z)``.
    D0 : float, optional
        The dissipation rate at the start, when known.
    centre : bool
        Give ``Z_end`` row maxima exactly 0 (else at most 0, and ``A_end`` is the same).
    work : Workspace, optional
    out : tuple of two ndarrays, optional
        Receive ``Z_end`` and ``A_end``; new arrays otherwise.

    Returns
    -------
    Z_end, A_end : ndarray, shape (N, N)
    D_start, D_end, mean_D : float
        Dissipation rate at both ends and its time average.
    """
    work = Workspace() if work is None else work
    N, n = Z.shape
    rows = max(1, min(N, _BLOCK_ELEMENTS // max(n, 1)))
    bshape = (rows, n)
    Wb, W2, Zm = work.get("rt.W", bshape), work.get("rt.W2", bshape), work.get("rt.Zm", bshape)
    ones = np.ones(n)
    osc = np.empty(N)
    rate, x = lam / beta, lam * tau
    Z_end, A_end = (np.empty(Z.shape), np.empty(Z.shape)) if out is None else out

    def variance(Ek, w, w2, s, dst):
        """``Var`` of ``w`` under the row weights ``Ek / s`` (``w2 = w²``)."""
        m = np.vecdot(Ek, w)
        m /= s
        np.vecdot(Ek, w2, out=dst)
        dst /= s
        dst -= m * m

    def exponentials(Zk, Ek):
        """``exp(Zk)`` (rows at most 0) into ``Ek`` and its row sums; exact max if tiny."""
        np.exp(Zk, out=Ek)
        s = Ek @ ones  # row sums (a BLAS gemv, faster than a reduction)
        if s.min() < _TINY_ROW_SUM:
            bad = s < _TINY_ROW_SUM
            Zb = Zk[bad]
            Zb -= Zb.max(axis=1, keepdims=True)
            Ek[bad] = np.exp(Zb)  # a row constant of Zk changes no attention
            s = Ek @ ones
        return s

    def sweep(u):
        """Every sample at the nodes ``u`` (the last, u = 1, from ``A0``), block by block."""
        var = np.empty((len(u), N))  # Var_{A(u_k)}(W) per row
        for r0 in range(0, N, rows):
            r1 = min(N, r0 + rows)
            k_rows = r1 - r0
            Zb = Z[r0:r1]
            w = np.subtract(Zb, T[r0:r1], out=Wb[:k_rows])
            np.subtract(w.max(axis=1), w.min(axis=1), out=osc[r0:r1])
            w2 = np.multiply(w, w, out=W2[:k_rows])
            for k in range(len(u) - 1):
                Zk, Ek = (Z_end[r0:r1], A_end[r0:r1]) if k == 0 else (Zm[:k_rows],) * 2
                np.multiply(w, u[k] - 1.0, out=Zk)  # Z − (1 − u) W
                Zk += Zb
                s = exponentials(Zk, Ek)
                variance(Ek, w, w2, s, var[k, r0:r1])
                if k == 0:
                    np.divide(1.0, s, out=s)
                    Ek *= s[:, None]
                    if centre:
                        centre_rows(Zk, out=Zk)
            if D0 is None:
                variance(A0[r0:r1], w, w2, 1.0, var[-1, r0:r1])
        return var

    hints = work.hints
    panels = hints.get("rt.panels", 1)
    while True:
        u, coef = _simpson_nodes(x, panels)
        var = sweep(u)
        spread = (1.0 - u[0]) * float(osc.max())
        needed = _simpson_panels(spread)
        if needed == panels:
            break
        panels = hints["rt.panels"] = needed
    D_end = rate * u[0] * u[0] * float(var[0].sum())
    D_start = rate * float(var[-1].sum()) if D0 is None else D0
    mean_D = D_end + coef[-1] * (D_start - D_end)
    for k in range(1, len(u) - 1):
        mean_D += coef[k - 1] * (rate * u[k] * u[k] * float(var[k].sum()) - D_end)
    return Z_end, A_end, D_start, D_end, mean_D


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
