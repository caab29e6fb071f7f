"""One stiff step of the canonical model on stacks of runs: :func:`stiff_verlet`, the kernel
of the stiff branch of :meth:`~dynamics.steppers.etd_verlet.EtdVerlet.verlet` (its readable
twin), each row with its own step size; and the per-row scalars of a step size,
:func:`step_constants`. Used by :class:`~dynamics.batch_stiff.StiffBatch` for whole steps
and for the sub-steps of graded ones.

Every operation is the one a run performs, on each row's slice (per-run scalars as arrays
of the floats a run computes): a row's results equal the run's bit for bit
(``tests/test_batch_stiff.py``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from . import energy as en
from .logits import exp_quadratic, hermite_logit_weights, logit_coefficients
from .relaxation import simpson_panels
from .steppers.transient import (
    _GAUSS_U,
    _GAUSS_W,
    TRANSIENT_OSC,
    _log_weights,
    hermite_lag,
    trapezoid_defects,
)

#: The per-row scalars of :func:`step_constants` shaped (R, 1, 1) (broadcast on matrices);
#: the others are shaped (R,).
MATRIX_SCALARS = ("Eh", "ba0", "ba1", "bb0", "bb1", "ell_beta", "minus_ell", "bhc", "bhc0",
                  "bhc1", "x", "x2", "half_E", "half_c0", "half_b", "drift", "tau")


def step_constants(problems, steps) -> SimpleNamespace:
    """The scalars of a stiff step of size ``steps[k]`` of each problem, as
    :meth:`~dynamics.steppers.etd_verlet.EtdVerlet.constants` and the step compute them."""
    rows = {name: [] for name in MATRIX_SCALARS + ("ell", "c1", "c2", "rate", "lam_h", "wq0",
                                                   "wq1", "wq2", "h", "beta")}
    for p, h in zip(problems, steps, strict=True):
        beta, lam = p.beta, p.relaxation_rate
        E, a0, a1, b0, b1 = hermite_logit_weights(lam, h)
        hc, hc0, hc1 = hermite_lag(lam, h)
        ell = -(beta / (lam * h))
        c1, c2 = trapezoid_defects(lam * h)
        wq = tuple(beta * w for w in exp_quadratic(lam, h))
        half = logit_coefficients(beta, lam, 0.5 * h)
        x = lam * h
        for name, value in (("Eh", E), ("ba0", beta * a0), ("ba1", beta * a1),
                            ("bb0", beta * b0), ("bb1", beta * b1), ("ell_beta", ell - beta),
                            ("minus_ell", -ell), ("bhc", -beta * hc), ("bhc0", beta * hc0),
                            ("bhc1", beta * hc1), ("x", x), ("x2", x * x), ("half_E", half[0]),
                            ("half_c0", half[1]), ("half_b", half[2]), ("drift", h / p.mass),
                            ("tau", 0.5 * h), ("ell", ell), ("c1", c1), ("c2", c2),
                            ("rate", lam / beta), ("lam_h", x), ("wq0", wq[0]),
                            ("wq1", wq[1]), ("wq2", wq[2]), ("h", h), ("beta", beta)):
            rows[name].append(value)
    c = SimpleNamespace(**{name: np.array(v, dtype=float) for name, v in rows.items()})
    for name in MATRIX_SCALARS:
        setattr(c, name, getattr(c, name)[:, None, None])
    for name in ("wq0", "wq1", "wq2"):
        setattr(c, name, getattr(c, name)[:, None])
    return c


def stiff_verlet(b, c, rows, X0, P0, Z0, A0, S0, force0, D0, decaying):
    """One stiff step of the rows ``rows`` of batch ``b`` (indices; None: all), sizes and
    scalars ``c`` (:func:`step_constants`), from ``X0 … S0`` with the carried force and
    dissipation rate ``D0`` (None: a run's first step). ``decaying(osc_W0)``: the rows whose
    step after a graded one is graded on (they take the transient's mean), from
    ``max osc W₀`` of each row.

    Returns a dict of the new ``X, P, Z, A, S``, ``XM`` (``X₁M``), ``force``, ``D``, the
    energy ``dissipated`` over the step, ``osc_W0`` (``max osc W₀``) and ``transient``
    (rows that took the transient's mean: a large transient, or ``decaying``)."""
    M = b.M if rows is None else b.M[rows]
    MMt = b.MMt if rows is None else b.MMt[rows]
    mass = b.mass_col if rows is None else b.mass_col[rows]
    d = X0.shape[-1]
    P_half = P0 + c.tau * force0
    X1 = X0 + c.drift * P_half
    X1MMt = X1 @ MMt
    X1M, X1Mt = X1MMt[..., :d], X1MMt[..., d:]
    S1 = np.matmul(X1M, X1.transpose(0, 2, 1))
    rates = _score_rates(M, mass, X0, P0, X1, P_half + c.tau * force0, X1M)
    Z1 = rates(c.bb0, c.bb1)  # the scores cubic in time (Hermite)
    b._axpy(c.Eh, Z0, Z1)
    b._axpy(c.ba0, S0, Z1)
    b._axpy(c.ba1, S1, Z1)
    np.subtract(Z1, en.max_reduce(Z1, -1, keepdims=True), out=Z1)
    A1 = np.exp(Z1)
    A1 *= np.divide(1.0, en.sum_reduce(A1, -1))[..., None]
    force1 = b._force(X1, A1, X1M, X1Mt, rows)
    P1 = P_half + c.tau * force1
    if D0 is None:
        D0 = _dissipation_rate(b, c, A0, Z0, S0)
    D1 = _dissipation_rate(b, c, A1, Z1, S1)
    dissipated = 0.5 * c.h * (D0 + D1)
    # the transient towards the lagged target (transient.lagged_start, hermite_transient)
    W0 = np.multiply(S0, c.ell_beta)
    W0 += Z0
    b._axpy(c.minus_ell, S1, W0)
    dS = np.subtract(S1, S0)
    Wt = np.subtract(W0, rates(c.bhc0, c.bhc1))
    b._axpy(c.bhc, dS, Wt)
    osc_W0 = en.max_reduce(en.oscillation(W0), -1)
    transient = decaying(osc_W0) | ~(en.max_reduce(en.oscillation(Wt), -1) <= TRANSIENT_OSC)
    # transient.tracking_correction
    W0c = np.subtract(Wt, np.vecdot(A0, Wt)[..., None])
    cov = b._vdot(A0, W0c * dS)
    var = b._vdot(A0, W0c * W0c)
    dissipated += c.h * (c.rate * (2.0 * c.ell * cov * c.c1 + var * c.c2))
    whole = np.flatnonzero(transient)
    if len(whole):  # the transient's mean: a kick correction, ∫D along the path
        A_mean = _transient_mean(b, c, whole, Z0, S0, S1, A0, A1, W0, osc_W0)
        a0, a1, x0, m = A0[whole], A1[whole], X0[whole], M[whole]
        K = 2.0 * (A_mean - 0.5 * (a0 + a1))
        kicked = b._force(x0, a0 + K, x0 @ m, x0 @ m.transpose(0, 2, 1),
                          whole if rows is None else rows[whole])
        P1[whole] += c.tau[whole] * (kicked - force0[whole])
        dissipated[whole] = _path_dissipation(b, c, whole, Z0, S0, A0, Z1, S1, A1, A_mean)
    return {"X": X1, "P": P1, "Z": Z1, "A": A1, "S": S1, "XM": X1M, "force": force1,
            "D": D1, "dissipated": dissipated, "osc_W0": osc_W0, "transient": transient}


def _score_rates(M, mass, X0, P0, X1, P1, X1M):
    """``etd_verlet._score_rates``: ``rates(w₀, w₁) = w₀ Ṡ(t₀) + w₁ Ṡ(t₁)``."""
    V0, V1 = P0 / mass, P1 / mass
    V0M, V1M, X0M = V0 @ M, V1 @ M, X0 @ M

    def rates(w0, w1):
        left = np.concatenate((w0 * V0M, X0M, w1 * V1M, X1M), axis=2)
        return left @ np.concatenate((X0, w0 * V0, X1, w1 * V1), axis=2).transpose(0, 2, 1)

    return rates


def _dissipation_rate(b, c, A, Z, S):
    """``logits.logit_dissipation_rate``: ``(λ/β) Σ_i Var_{A_i}(Z_i − βS_i)``."""
    W = np.multiply(S, -c.beta[:, None, None])
    W += Z
    W -= np.vecdot(A, W)[..., None]
    W *= W
    return c.rate * b._vdot(A, W)


def _transient_mean(b, c, rows, Z0, S0, S1, A0, A1, W0, osc_W0):
    """``transient.transient_mean`` of the rows ``rows`` (indices into the step's rows):
    each with its own panels in ``u`` (rows grouped by their count)."""
    x = c.lam_h[rows]
    panels = [simpson_panels((1.0 - math.exp(-v)) * o)
              for v, o in zip(x, osc_W0[rows], strict=True)]
    mean = np.empty((len(rows),) + Z0.shape[1:])
    for count in sorted(set(panels)):
        group = np.array([k for k, p in enumerate(panels) if p == count])
        r = rows[group]
        mean[group] = _mean_of(b, c, r, count, Z0[r], S0[r], S1[r], A0[r], A1[r], W0[r])
    return mean


def _softmax(Z):
    A = np.subtract(Z, en.max_reduce(Z, -1, keepdims=True))
    np.exp(A, out=A)
    A *= np.divide(1.0, en.sum_reduce(A, -1))[..., None]
    return A


def _response(A, V):
    return A * (V - np.vecdot(A, V)[..., None])


def _col(values):
    return np.array(values, dtype=float)[:, None, None]


def _mean_of(b, c, r, count, Z0, S0, S1, A0, A1, W0):
    """:func:`_transient_mean` of rows ``r`` that share their count of panels."""
    beta, x = c.beta[r][:, None, None], c.lam_h[r]
    E, e_half = [math.exp(-v) for v in x], [math.exp(-0.5 * v) for v in x]
    target = np.subtract(S1, S0)
    V = target * beta
    target *= _col([-(bt / v) for bt, v in zip(c.beta[r], x, strict=True)])
    b._axpy(beta, S0, target)

    def frozen(u):
        return _softmax(b._axpy(u, W0, target.copy()))

    A_T = _softmax(target)
    A_fm, A_fe = frozen(_col(e_half)), frozen(_col(E))
    Z_half = np.multiply(Z0, c.half_E[r])  # logit_step over half the step
    b._axpy(c.half_c0[r], S0, Z_half)
    b._axpy(c.half_b[r], 0.5 * (S0 + S1), Z_half)
    A_half = _softmax(Z_half)
    J0 = _response(A_T, V)
    frozen_q, response_p = np.zeros(Z0.shape), np.zeros(Z0.shape)
    edges = [np.linspace(e, 1.0, count + 1) for e in E]
    for j in range(count):
        ab = [(float(e[j]), float(e[j + 1])) for e in edges]
        nodes = [[lo + (hi - lo) * g for g in _GAUSS_U] for lo, hi in ab]
        logw = [_log_weights(lo, hi, u) for (lo, hi), u in zip(ab, nodes, strict=True)]
        for k, gw in enumerate(_GAUSS_W):
            Ak = frozen(_col([u[k] for u in nodes]))
            Ak -= A_T
            frozen_q += _col([(hi - lo) * gw / u[k]
                              for (lo, hi), u in zip(ab, nodes, strict=True)]) * Ak
            Ak += A_T
            response_p += _col([w[k] / u[k] for w, u in zip(logw, nodes, strict=True)]) * (
                _response(Ak, V) - J0)
    mean = (A0 + 4.0 * A_half + A1) / 6.0
    mean += frozen_q / c.x[r]
    mean -= (A0 + 4.0 * A_fm + A_fe - 6.0 * A_T) / 6.0
    mean += response_p / c.x2[r]
    mean -= (2.0 * _response(A_fm, V) + _response(A_fe, V) - 3.0 * J0) / 6.0
    return mean


def _path_dissipation(b, c, rows, Z0, S0, A0, Z1, S1, A1, A_mean):
    """``transient.path_dissipation`` of the rows ``rows``."""
    def log_softmax(Z):
        m = Z.max(axis=-1, keepdims=True)
        return Z - (m + np.log(np.exp(Z - m).sum(axis=-1, keepdims=True)))

    z0, s0, a0, z1, s1, a1 = (v[rows] for v in (Z0, S0, A0, Z1, S1, A1))
    neg_entropy = b._vdot(a1, log_softmax(z1)) - b._vdot(a0, log_softmax(z0))
    return (b._vdot(a1 - A_mean, s1) + b._vdot(A_mean - a0, s0)
            - neg_entropy / c.beta[rows])


__all__ = ["MATRIX_SCALARS", "step_constants", "stiff_verlet"]
