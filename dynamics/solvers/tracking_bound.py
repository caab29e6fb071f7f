"""The tracking bound of a step taken by a solver of its own (:mod:`dynamics.solvers.explicit`,
:mod:`dynamics.solvers.exprk`), by quadrature.

The bound ``dB/dt = −λB + β osc(dS/dt)`` is not in the solver's system: ``osc`` (a max
minus a min) has kinks wherever a row's extreme entry changes, which the error estimate
sees as large errors (in the system it made DOP853 reject about one step in two and
evaluate the field 2.4 times as often at rtol 1e-3). Each step instead updates it by
quadrature, :func:`bound_steps`: ``X`` on the step is the quintic Hermite interpolant of
``X, Ẋ = P/m, Ẍ = Ṗ/m`` at both ends (the solver's field at the step's end is at hand,
first same as last), ``dS/dt`` at :data:`BOUND_NODES` + 1 points from it, and Simpson's
rule of ``e^{−λ(h−s)} β osc(dS/dt)``.
"""

from __future__ import annotations

import math

import numpy as np

#: Simpson intervals of the tracking bound's quadrature per step (even).
BOUND_NODES = 32
#: Quintic Hermite basis on [0, 1], monomial coefficients (rows: powers 0…5) of the
#: weights of p(0), p'(0), p''(0), p(1), p'(1), p''(1).
_HERMITE = np.array([
    [1, 0, 0, 0, 0, 0],
    [0, 1, 0, 0, 0, 0],
    [0, 0, 0.5, 0, 0, 0],
    [-10, -6, -1.5, 10, -4, 0.5],
    [15, 8, 1.5, -15, 7, -1],
    [-6, -3, -0.5, 6, -3, 0.5]])


def _hermite_tables(m: int):
    """Values and τ-derivatives of the quintic Hermite basis at ``τ = k/m``, shapes
    (m + 1, 6), and Simpson's weights on those nodes (summing to 1)."""
    tau = np.linspace(0.0, 1.0, m + 1)
    powers = tau[:, None] ** np.arange(6)
    d_powers = np.zeros_like(powers)
    d_powers[:, 1:] = powers[:, :-1] * np.arange(1, 6)
    simpson = np.ones(m + 1)
    simpson[1:-1:2], simpson[2:-1:2] = 4.0, 2.0
    return powers @ _HERMITE, d_powers @ _HERMITE, tau, simpson / (3.0 * m)


_TABLES = _hermite_tables(BOUND_NODES)


def bound_steps(prob, B0, hs, ends0, ends1, smooth=math.inf):
    """The tracking bound after ``k`` consecutive steps of sizes ``hs`` (shape (k,)):
    ``B_j = e^{−λh_j} B_{j−1} + β ∫₀^{h_j} e^{−λ(h_j−s)} osc(dS/dt(s)) ds``, with ``X(s)``
    on each step the quintic Hermite interpolant of ``X, V = Ẋ, acc = Ẍ`` at its ends
    (``ends0``, ``ends1``: arrays of shape (k, 3, N, d) holding ``X, V, acc`` at the start
    and end of each step) and ``dS/dt = V M Xᵀ + X M Vᵀ``, by Simpson's rule on
    :data:`BOUND_NODES` intervals, all steps in one batch. Steps with ``λh > smooth`` (the
    exponential branch's: Simpson's rule cannot follow the kernel's spike of width
    ``1/λ``) integrate ``e^{−λ(h−s)}`` exactly against the piecewise-linear interpolant of
    ``osc`` on the same nodes (the exponential trapezoid rule). ``B0`` shape (N,); returns
    ``B_k``, shape (N,)."""
    values, slopes, tau, weights = _TABLES
    k, _, N, d = ends0.shape
    scale = np.stack((np.ones(k), hs, hs * hs), axis=1)[:, :, None, None]  # 1, h, h²
    data = np.concatenate((ends0 * scale, ends1 * scale), axis=1).reshape(k, 6, N * d)
    XV = (np.concatenate((values, slopes)) @ data).reshape(k, 2, -1, N, d)
    Xs, Vs = XV[:, 0], XV[:, 1] / hs[:, None, None, None]
    S_dot = (Vs @ prob.M) @ Xs.swapaxes(-1, -2)
    S_dot += (Xs @ prob.M) @ Vs.swapaxes(-1, -2)
    osc = S_dot.max(axis=-1) - S_dot.min(axis=-1)  # (k, m + 1, N)
    lam = prob.relaxation_rate
    decay = np.exp(-lam * hs[:, None] * (1.0 - tau))
    w = (prob.beta * hs)[:, None] * weights * decay
    spiky = lam * hs > smooth
    if np.any(spiky):  # the kernel a spike at the step's end: its exact integral against
        # the piecewise-linear interpolant of osc (exponential trapezoid rule, per interval
        # of width δ: weights δ(φ₁(x) − χ), δχ, χ = ψ(x)/x, x = λδ)
        delta = hs[spiky] / (len(tau) - 1)
        x = lam * delta
        em1 = np.expm1(-x)
        chi = (1.0 + em1 / x) / x
        w0, w1 = delta * (-em1 / x - chi), delta * chi
        e = decay[spiky, 1:]
        ws = np.zeros((len(delta), len(tau)))
        ws[:, :-1] += w0[:, None] * e
        ws[:, 1:] += w1[:, None] * e
        w[spiky] = prob.beta * ws
    g = np.einsum("km,kmn->kn", w, osc)
    B = B0
    for decay, g_j in zip(np.exp(-lam * hs), g, strict=True):
        B = decay * B + g_j
    return B


__all__ = ["BOUND_NODES", "bound_steps"]
