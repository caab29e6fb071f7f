"""Relaxations of the logits towards frozen effective scores (stiff-safe kernels).

Along a relaxation with frozen ``Ŝ`` the exact path is ``Z(s) = βŜ + L + u W₀`` with
``u = e^{−λs}``; time averages of attention and dissipation along it are integrated in
``u``, which is accurate for any ``λh``.

* :func:`relaxation_averages` — attention and dissipation averaged along a relaxation
  (composite Simpson in ``u``), used to carry fast transients exactly.
* :func:`relax` — the same, returning only the end and the dissipated energy.
* :func:`relax_to_target` / :func:`relax_chain` — the cotangent lift's relaxations, in
  one sweep over row blocks, dissipation by the corrected trapezoid rule.
"""

from __future__ import annotations

import math

import numpy as np

from .energy import log_rowsoftmax, max_reduce, min_reduce, oscillation, row_variance, rowsoftmax
from .logits import axpy, centre_rows, phi1
from .workspace import Workspace


def relaxation_averages(Z, S_hat, beta, lam, tau, A0=None, lag=None, *, W0=None, D0=None,
                        mean_A=True, work=None, out=None):
    """Attention and dissipation along a relaxation of duration ``τ`` with frozen ``Ŝ``.

    The exact solution is ``Z(s) = βŜ + L + u W₀`` with ``u = e^{−λs}``,
    ``W₀ = Z − βŜ − L`` and ``L`` the steady lag (0 unless given), and the
    dissipation rate along it is ``D = (λ/β) Σ_i Var_{A_i}(L_i + u W₀_i)``. A time average becomes
    ``⟨g⟩ = g_E + (1/λτ) ∫_E^1 (g(u) − g_E)/u du`` (``E = e^{−λτ}``), integrated by
    composite Simpson's rule in ``u``. One panel serves while attention stays near its
    target; far from it (a stiff step from a distant start) the panels grow with
    ``(1 − E)·max osc(W₀)`` (at most 32). The integrand holds ``−g′(0) E/u`` near
    ``u = E``, which the rule does not resolve when ``E`` is small but not negligible
    (``λτ`` of a few): the mean of attention then errs by up to about ``E |g′|``, that of
    ``D`` (``∝ u²`` without a lag) by ``E²``. (The steppers take the mean of a stiff step
    from :func:`~dynamics.steppers.transient.transient_mean` instead, which splits off the
    target's attention and integrates a smooth ``(g(u) − g(0))/u``.)

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
    spread = (1.0 - math.exp(-x)) * float(max_reduce(oscillation(W0), None))
    u, coef = simpson_nodes(x, simpson_panels(spread))
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


def simpson_panels(spread):
    """Panels of the composite Simpson rule in ``u`` for a relaxation whose logits move
    by ``spread`` = (1 − E)·max osc(W₀): one while near the target, at most 32."""
    return int(min(32, max(1, math.ceil(spread / 1.5))))


def simpson_nodes(x, panels):
    """Nodes ``u_k`` (``E = e^{−x}`` … 1) and weights ``coef_k`` of the time average in u."""
    E = math.exp(-x)
    u = np.linspace(E, 1.0, 2 * panels + 1).tolist()
    u[-1] = 1.0
    weights = [1.0] + [4.0 if k % 2 else 2.0 for k in range(1, 2 * panels)] + [1.0]
    scale = phi1(x) / (6.0 * panels)  # (1 − E) / x × Δu / 3 with Δu = (1 − E)/(2n)
    return u, [scale * w / uk for w, uk in zip(weights[1:], u[1:], strict=True)]


#: The most panels of :func:`trapezoid_panels`; a relaxation whose logits move further
#: (``spread`` over ``0.75 ×`` this) takes its dissipation from the free energy instead
#: (:func:`relax_chain`).
MAX_TRAPEZOID_PANELS = 64
#: The largest ``spread`` :func:`trapezoid_panels` resolves.
RESOLVED_SPREAD = 0.75 * MAX_TRAPEZOID_PANELS


def trapezoid_panels(spread):
    """Panels of the corrected trapezoid rule of :func:`relax_to_target`: two per panel of
    :func:`simpson_panels`, so the same samples as Simpson's rule once it needs more than
    one panel. On the same nodes (spacing ``H``) its error, ``H⁴/720 ∫F⁗``, is a quarter
    of Simpson's ``H⁴/180 ∫F⁗``; its single panel, up to ``spread`` 0.75, needs no sample
    inside."""
    return int(min(MAX_TRAPEZOID_PANELS, max(1, math.ceil(spread / 0.75))))


def target_divergence(Z, log_t):
    """``Σ_i KL(rowsoftmax(Z)_i ‖ T_i)`` with ``log_t`` the target's log-attention: along a
    relaxation towards a frozen target it falls at ``β D`` (Theory page: the logit form),
    so its drop over the relaxation, divided by ``β``, is the energy it dissipates."""
    log_a = log_rowsoftmax(Z)
    return float(np.sum(np.exp(log_a) * (log_a - log_t)))


def relax_to_target(Z, T, beta, lam, tau, A0, *, D0=None, K0=None, centre=True, work=None,
                    out=None):
    """A relaxation of duration ``τ`` towards a frozen target ``T = βŜ`` (no lag, no mean
    of ``A``): the logits and attention of :func:`relaxation_averages`, its dissipation
    by the corrected trapezoid rule, in one sweep over row blocks.

    Along the exact path ``Z(u) = T + u W`` (``W = Z − T``, ``u = e^{−λs}``) the
    dissipation rate is ``D(u) = (λ/β) u² V(u)`` with ``V(u) = Var_{A(u)}(W)`` summed over
    rows, and ``dV/du = κ₃(u)``, the third cumulant of ``W`` under ``A(u)``
    (``∂_u log A(u) = W − E_{A(u)} W``). The time average
    ``⟨D⟩ = (1/λτ) ∫_E^1 D(u)/u du = (λ/β)(1/λτ) ∫_E^1 F(u) du`` with ``F = u V``, smooth on
    [0, 1] for any ``λτ``, is integrated by the trapezoid rule with the Euler–Maclaurin
    end correction ``H²/12 (F′(E) − F′(1))``, ``F′ = V + u κ₃``: order 4 like Simpson's
    rule, with derivatives that need only ``κ₃`` at the two ends. One panel (no sample inside)
    serves while attention stays near its target, which saves the exponentials of the
    midpoint Simpson would need; far from it the panels grow with ``(1 − E)·max osc(W)``
    (:func:`trapezoid_panels`).

    Every quantity is row-wise, so each block of rows goes through all samples at once,
    while it stays in cache. The panel count depends on the largest row oscillation of
    ``W``, known only at the end of the sweep: the sweep assumes the count of the
    previous call (kept in ``work``) and is repeated in the rare case it was wrong.

    ``T`` and ``Z`` must have row maxima at most 0 (and not far below it): every sample
    ``u Z + (1 − u) T`` then has row maxima at most 0 and its exponentials need no
    max-subtraction (a row whose sum underflows is recomputed with its exact maximum).
    Moments are taken as ``E[W^p]`` from unnormalised exponentials and their row sums:
    each row of ``W`` takes both signs (0 lies between the maxima of ``Z`` and ``T``), so
    ``|W| ≤ osc(W)`` and the rounding error of ``V`` stays below ``ε osc(W)²``, the order
    of that of the centred two-pass sum.

    Parameters
    ----------
    Z, T : ndarray, shape (N, N)
        Logits at the start and the frozen target ``βŜ``, row maxima at most 0.
    beta, lam, tau : float
    A0 : ndarray, shape (N, N)
        ``rowsoftmax(Z)``.
    D0, K0 : float, optional
        ``(λ/β) Var_{A0}(W)`` and ``(λ/β) κ₃`` of ``W`` under ``A0`` summed over rows,
        when known (a relaxation continuing towards the same target: the previous call's
        ``D_end``, ``K_end``); both or neither.
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
    K_end : float
        ``(λ/β) κ₃`` of ``Z_end − T`` under ``A_end``: the ``K0`` of a relaxation that
        continues from ``Z_end`` towards ``T``.
    """
    return relax_chain(Z, T, beta, lam, (tau,), A0, D0=D0, K0=K0, centre=centre, work=work,
                       outs=None if out is None else (out,))[0]


def relax_chain(Z, T, beta, lam, taus, A0, *, D0=None, K0=None, centre=True, work=None,
                outs=None):
    """Successive relaxations of durations ``taus`` towards the same frozen target ``T``,
    each continuing from the previous one's end, in one sweep over row blocks: the
    results of :func:`relax_to_target` for each (same parameters; ``outs`` one pair of
    arrays per relaxation, or None).

    All of them lie on the one exact path ``Z(u) = T + u W`` (``W = Z − T``): relaxation
    ``s`` covers ``u`` from ``U_s`` down to ``U_{s+1} = U_s e^{−λτ_s}`` (``U_0 = 1``), so
    each block of rows computes ``W`` and its powers once for all of them.

    A relaxation whose logits move too far for the trapezoid rule's panels (``spread``
    ``(1 − E)·max osc(W)`` over :data:`RESOLVED_SPREAD`: attention jumping between
    vertices, in a run whose scores run away) takes no sample inside and its mean
    dissipation from the drop of :func:`target_divergence`, exact to rounding.

    Returns
    -------
    list of tuples ``(Z_end, A_end, D_start, D_end, mean_D, K_end)``, one per relaxation.
    """
    if (D0 is None) != (K0 is None):
        raise ValueError("D0 and K0 are given together")
    work = Workspace() if work is None else work
    N, n = Z.shape
    rows = max(1, min(N, _BLOCK_ELEMENTS // max(n, 1)))
    bshape = (rows, n)
    Wb, W2, W3 = work.get("rt.W", bshape), work.get("rt.W2", bshape), work.get("rt.W3", bshape)
    Zm, Em = work.get("rt.Zm", bshape), work.get("rt.Em", bshape)
    ones = np.ones(n)
    hi, lo = np.empty(N), np.empty(N)
    rate = lam / beta
    xs = [lam * tau for tau in taus]
    Es = [math.exp(-x) for x in xs]
    U = [1.0]  # where each relaxation starts on the path
    for E in Es:
        U.append(U[-1] * E)
    if outs is None:
        outs = [(np.empty(Z.shape), np.empty(Z.shape)) for _ in taus]

    def exponentials(Zk, Ek, s):
        """``exp(Zk)`` (rows at most 0) into ``Ek``, its row sums into ``s``; a row whose
        sum is tiny is recomputed with its exact maximum."""
        np.exp(Zk, out=Ek)
        np.matmul(Ek, ones, out=s)  # row sums (a BLAS gemv, faster than a reduction)
        if s.min() < _TINY_ROW_SUM:
            bad = s < _TINY_ROW_SUM
            Zb = Zk[bad]
            Zb -= Zb.max(axis=1, keepdims=True)
            Ek[bad] = np.exp(Zb)  # a row constant of Zk changes no attention
            np.matmul(Ek, ones, out=s)

    def sweep(samples):
        """Row sums ``Σ E W^p`` (p = 0…3; p = 3 at the ends only) of the unnormalised
        weights ``E`` at the path points ``samples`` (``(u, out)``: ``out`` the arrays of a
        relaxation's end, None inside one) and at ``u = 1`` from ``A0`` (the last),
        block by block."""
        sums = np.zeros((4, len(samples) + 1, N))
        sums[0, -1] = 1.0
        for r0 in range(0, N, rows):
            r1 = min(N, r0 + rows)
            k_rows = r1 - r0
            Zb = Z[r0:r1]
            w = np.subtract(Zb, T[r0:r1], out=Wb[:k_rows])
            max_reduce(w, 1, out=hi[r0:r1])
            min_reduce(w, 1, out=lo[r0:r1])
            w2 = np.multiply(w, w, out=W2[:k_rows])
            w3 = np.multiply(w2, w, out=W3[:k_rows])
            for k, (u, out) in enumerate(samples):
                # (an inside sample's logits and exponentials in separate arrays: a row
                # whose sum underflows is recomputed from its logits)
                Zk, Ek = (out[0][r0:r1], out[1][r0:r1]) if out else (Zm[:k_rows], Em[:k_rows])
                np.multiply(w, u - 1.0, out=Zk)  # Z − (1 − u) W
                Zk += Zb
                s = sums[0, k, r0:r1]
                exponentials(Zk, Ek, s)
                np.vecdot(Ek, w, out=sums[1, k, r0:r1])
                np.vecdot(Ek, w2, out=sums[2, k, r0:r1])
                if out:
                    np.vecdot(Ek, w3, out=sums[3, k, r0:r1])
                    Ek *= np.divide(1.0, s)[:, None]
                    if centre:
                        centre_rows(Zk, out=Zk)
            if D0 is None:
                A0b = A0[r0:r1]
                for p, wp in ((1, w), (2, w2), (3, w3)):
                    np.vecdot(A0b, wp, out=sums[p, -1, r0:r1])
        sums[1:] /= sums[0]  # E[W^p] per node and row
        mean, m2, m3 = sums[1], sums[2], sums[3]
        var = m2 - mean * mean
        k3 = m3 - mean * (3.0 * m2 - 2.0 * mean * mean)
        return var.sum(axis=1), k3.sum(axis=1)  # Σ_i over rows, per sample (κ₃: ends only)

    hints = work.hints
    panels = [hints.get(f"rt.panels.{s}", 1) for s in range(len(taus))]
    while True:
        nodes, samples = [], []  # per relaxation: its nodes u′ (E … 1) and sample indices
        for s, (E, m) in enumerate(zip(Es, panels, strict=True)):
            u = np.linspace(E, 1.0, m + 1).tolist()
            u[-1] = 1.0
            nodes.append(u)
            samples.append((U[s] * E, outs[s]))  # its end ...
            samples.extend((U[s] * uk, None) for uk in u[1:-1])  # ... and inside
        V, k3 = sweep(samples)
        osc = float(np.max(hi - lo))
        spreads = [(1.0 - E) * U[s] * osc for s, E in enumerate(Es)]
        # (a relaxation the rule cannot resolve needs no sample inside: see below)
        needed = [1 if x > RESOLVED_SPREAD else trapezoid_panels(x) for x in spreads]
        if needed == panels:
            break
        panels = needed
        hints.update({f"rt.panels.{s}": m for s, m in enumerate(panels)})

    log_t, starts = None, [Z] + [out[0] for out in outs[:-1]]
    results, at = [], 0
    if D0 is None:
        D_start, K_start = rate * float(V[-1]), rate * float(k3[-1])
    else:
        D_start, K_start = D0, K0
    for s, (E, x, u, m) in enumerate(zip(Es, xs, nodes, panels, strict=True)):
        # relaxation s in its own variable u′: W_s = U_s W, V_s(u′) = U_s² V(U_s u′),
        # κ₃ of W_s = U_s³ κ₃(U_s u′)
        Us2 = U[s] * U[s]
        V_end, k3_end = Us2 * float(V[at]), Us2 * U[s] * float(k3[at])
        D_end = rate * E * E * V_end
        K_end = rate * E**3 * k3_end
        # ⟨D⟩ = (1/x) ∫_E^1 D(u′)/u′ du′ = (λ/β)(1/x) ∫_E^1 F du′ with F = u′ V_s, smooth
        # on [0, 1], F′ = V_s + u′ κ₃: trapezoid plus H²/12 (F′(E) − F′(1)); H/x = φ₁(x)/m
        H = (1.0 - E) / m
        inner = 0.5 * (rate * E * V_end + D_start)
        for k in range(1, m):
            inner += rate * u[k] * Us2 * float(V[at + k])
        slope_end = rate * (V_end + E * k3_end)
        slope_start = D_start + K_start
        mean_D = phi1(x) / m * (inner + H / 12.0 * (slope_end - slope_start))
        if spreads[s] > RESOLVED_SPREAD:  # too far for the rule: from the KL's drop
            log_t = log_rowsoftmax(T) if log_t is None else log_t
            mean_D = lam * (target_divergence(starts[s], log_t)
                            - target_divergence(outs[s][0], log_t)) / (beta * x)
        results.append((*outs[s], D_start, D_end, mean_D, K_end))
        D_start, K_start = D_end, K_end
        at += m
    return results


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
