"""Stiff runs of the canonical model stepped together (``λh = γ dt/β`` above
``STIFF_LAMBDA_H``): :class:`StiffBatch`, the kernel of the stiff branch of
:meth:`~dynamics.steppers.etd_verlet.EtdVerlet.verlet` — its readable twin, which stays the
reference and takes every step this kernel does not.

A stiff step of a run (Theory: stiff relaxation) takes the scores cubic in time for its
logits, the trapezoidal rule for the dissipation and the kicks, and the share of the
transient of attention towards its lagged target that the rule misses: to first order
(``tracking_correction``) while attention tracks that target, else the transient's mean
(``transient_mean``, with a kick correction), in sub-steps of the run's own sizes when the
transient is a distant start or still decays after one (graded steps).

Here every row's step is computed on the stacks as the tracking step, operation for
operation as a run computes it (per-run scalars as arrays of the floats a run computes;
``np.matmul`` on stacks, row reductions over the last axis, sums over a matrix as
``np.vecdot`` of its flattened rows). A row whose step does not track (its transient is
large, or it still decays after a graded step) is then taken again from its state by its
own engine: its step, with the transient's mean and graded sub-steps of its own sizes, is
the run's, each row keeping its own step sequence. The tracking bound ``B`` follows
:meth:`~dynamics.steppers.tracked_verlet.TrackedEtdVerlet.finish` (the quadratic rule from
the second step on). ``tests/test_batch_stiff.py`` checks each run against ``simulate``.
"""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .batch_canonical import CanonicalBatch
from .logits import exp_quadratic, hermite_logit_weights, logit_coefficients
from .relaxation import simpson_panels
from .state import State
from .steppers.grading import GRADED_DECAY, GRADED_MIN_LAMBDA_H, GRADED_OSC
from .steppers.transient import (
    _GAUSS_U,
    _GAUSS_W,
    TRANSIENT_OSC,
    _log_weights,
    hermite_lag,
    trapezoid_defects,
)
from .steppers.verlet_carry import VerletCarry


class StiffBatch(CanonicalBatch):
    """Stiff runs of the canonical model stepped together (see the module docstring)."""

    #: Per-run constants and state, stacked along the first axis (compacted together).
    STACKS = CanonicalBatch.STACKS + (
        "Eh", "ba0", "ba1", "bb0", "bb1", "ell", "ell_beta", "minus_ell", "bhc", "bhc0",
        "bhc1", "c1", "c2", "rate", "wq0", "wq1", "wq2", "chain_decay", "D", "graded",
        "before", "x", "x2", "lam_h", "half_E", "half_c0", "half_b", "graders")

    def __init__(self, settings):
        super().__init__(settings)
        h = self.h
        probs = [sim.problem for sim in self.sims]

        def col(values):
            return np.array(values, dtype=float)[:, None, None]

        herm, lags, wq, defects = [], [], [], []
        for p in probs:
            beta, lam = p.beta, p.relaxation_rate
            E, a0, a1, b0, b1 = hermite_logit_weights(lam, h)
            herm.append((E, beta * a0, beta * a1, beta * b0, beta * b1))
            hc, hc0, hc1 = hermite_lag(lam, h)
            lags.append((-beta * hc, beta * hc0, beta * hc1))
            wq.append(tuple(beta * w for w in exp_quadratic(lam, h)))
            defects.append(trapezoid_defects(lam * h))
        self.Eh, self.ba0, self.ba1, self.bb0, self.bb1 = (col([v[k] for v in herm])
                                                           for k in range(5))
        self.bhc, self.bhc0, self.bhc1 = (col([v[k] for v in lags]) for k in range(3))
        self.wq0, self.wq1, self.wq2 = (np.array([v[k] for v in wq])[:, None]
                                        for k in range(3))
        ell = [-(p.beta / (p.relaxation_rate * h)) for p in probs]
        self.ell = np.array(ell)
        self.ell_beta = col([e - p.beta for e, p in zip(ell, probs, strict=True)])
        self.minus_ell = col([-e for e in ell])
        self.c1 = np.array([c[0] for c in defects])
        self.c2 = np.array([c[1] for c in defects])
        self.rate = np.array([p.relaxation_rate / p.beta for p in probs])
        self.chain_decay = np.array([math.exp(-GRADED_DECAY * p.relaxation_rate * h)
                                     for p in probs])
        x = [p.relaxation_rate * h for p in probs]
        self.lam_h = np.array(x)
        self.x, self.x2 = col(x), col([v * v for v in x])
        self.graders = self.lam_h >= GRADED_MIN_LAMBDA_H
        half = [logit_coefficients(p.beta, p.relaxation_rate, 0.5 * h) for p in probs]
        self.half_E, self.half_c0, self.half_b = (col([c[k] for c in half]) for k in range(3))
        n = len(probs)
        self.D, self.graded = np.zeros(n), np.zeros(n)
        self.before = np.zeros_like(self.osc)
        self.first = True  # no step taken: no D, no osc dS/dt one step before
        self.alone_steps = 0  # steps taken again by a run's own engine (reported)

    # -- stacked operations, each as the single-run code performs it --------------------
    def _rates(self, X0, P0, X1, P1, X1M):
        """``etd_verlet._score_rates``: ``rates(w₀, w₁) = w₀ Ṡ(t₀) + w₁ Ṡ(t₁)``."""
        M = self.M
        V0, V1 = P0 / self.mass_col, P1 / self.mass_col
        V0M, V1M, X0M = V0 @ M, V1 @ M, X0 @ M

        def rates(w0, w1):
            left = np.concatenate((w0 * V0M, X0M, w1 * V1M, X1M), axis=2)
            return left @ np.concatenate((X0, w0 * V0, X1, w1 * V1), axis=2).transpose(0, 2, 1)

        return rates

    def _rate(self, A, Z, S):
        """``logits.logit_dissipation_rate``: ``(λ/β) Σ_i Var_{A_i}(Z_i − βS_i)``."""
        W = np.multiply(S, -self.beta[:, None, None])
        W += Z
        W -= np.vecdot(A, W)[..., None]
        W *= W
        return self.rate * self._vdot(A, W)

    def _osc_max(self, W):
        """``max_i osc(W_i)`` of every row's matrix."""
        return en.max_reduce(en.oscillation(W), -1)

    def _transient_mean(self, rows, Z0, S0, S1, A0, A1, W0, osc_W0):
        """``transient.transient_mean`` of the rows ``rows`` (indices): the mean attention
        of their steps, each with its own panels in ``u`` (rows grouped by their count)."""
        x = self.lam_h[rows]
        panels = [simpson_panels((1.0 - math.exp(-v)) * o) for v, o in zip(
            x, osc_W0[rows], strict=True)]
        mean = np.empty((len(rows),) + Z0.shape[1:])
        for count in sorted(set(panels)):
            group = np.array([k for k, p in enumerate(panels) if p == count])
            r = rows[group]
            mean[group] = self._mean_of(r, x[group], count, Z0[r], S0[r], S1[r], A0[r],
                                        A1[r], W0[r])
        return mean

    def _mean_of(self, r, x, count, Z0, S0, S1, A0, A1, W0):
        """:meth:`_transient_mean` of rows ``r`` that share their count of panels."""
        beta = self.beta[r][:, None, None]

        def softmax(Z):
            A = np.subtract(Z, en.max_reduce(Z, -1, keepdims=True))
            np.exp(A, out=A)
            A *= np.divide(1.0, en.sum_reduce(A, -1))[..., None]
            return A

        def response(A, V):
            return A * (V - np.vecdot(A, V)[..., None])

        def col(values):
            return np.array(values, dtype=float)[:, None, None]

        E, e_half = [math.exp(-v) for v in x], [math.exp(-0.5 * v) for v in x]
        target = np.subtract(S1, S0)
        V = target * beta
        target *= col([-(self.beta[i] / (self.lam_h[i])) for i in r])
        self._axpy(beta, S0, target)

        def frozen(u):
            return softmax(self._axpy(u, W0, target.copy()))

        A_T = softmax(target)
        A_fm, A_fe = frozen(col(e_half)), frozen(col(E))
        Z_half = np.multiply(Z0, self.half_E[r])
        self._axpy(self.half_c0[r], S0, Z_half)
        self._axpy(self.half_b[r], 0.5 * (S0 + S1), Z_half)
        np.subtract(Z_half, en.max_reduce(Z_half, -1, keepdims=True), out=Z_half)
        A_half = np.exp(Z_half)
        A_half *= np.divide(1.0, en.sum_reduce(A_half, -1))[..., None]
        J0 = response(A_T, V)
        frozen_q, response_p = np.zeros(Z0.shape), np.zeros(Z0.shape)
        edges = [np.linspace(e, 1.0, count + 1) for e in E]
        for j in range(count):
            ab = [(float(e[j]), float(e[j + 1])) for e in edges]
            nodes = [[a + (b - a) * g for g in _GAUSS_U] for a, b in ab]
            logw = [_log_weights(a, b, u) for (a, b), u in zip(ab, nodes, strict=True)]
            for k, gw in enumerate(_GAUSS_W):
                uk = col([u[k] for u in nodes])
                Ak = frozen(uk)
                Ak -= A_T
                frozen_q += col([(b - a) * gw / u[k] for (a, b), u in zip(
                    ab, nodes, strict=True)]) * Ak
                Ak += A_T
                response_p += col([w[k] / u[k] for w, u in zip(logw, nodes, strict=True)]) * (
                    response(Ak, V) - J0)
        xc = col(x)
        mean = (A0 + 4.0 * A_half + A1) / 6.0
        mean += frozen_q / xc
        mean -= (A0 + 4.0 * A_fm + A_fe - 6.0 * A_T) / 6.0
        mean += response_p / self.x2[r]
        mean -= (2.0 * response(A_fm, V) + response(A_fe, V) - 3.0 * J0) / 6.0
        return mean

    def _path_dissipation(self, rows, Z0, S0, A0, Z1, S1, A1, A_mean):
        """``transient.path_dissipation`` of the rows ``rows``."""
        def log_softmax(Z):
            m = Z.max(axis=-1, keepdims=True)
            return Z - (m + np.log(np.exp(Z - m).sum(axis=-1, keepdims=True)))

        z0, s0, a0, z1, s1, a1 = (v[rows] for v in (Z0, S0, A0, Z1, S1, A1))
        vdot = self._vdot
        neg_entropy = vdot(a1, log_softmax(z1)) - vdot(a0, log_softmax(z0))
        return vdot(a1 - A_mean, s1) + vdot(A_mean - a0, s0) - neg_entropy / self.beta[rows]

    def step(self):
        """One step of every row: the tracking stiff step on the stacks, then the rows
        that do not track taken again by their own engine (:meth:`_alone`). Raises
        ``FloatingPointError`` where a run would stop (and changes nothing then)."""
        h, tau = self.h, 0.5 * self.h
        X0, P0, Z0, A0, S0 = self.X, self.P, self.Z, self.A, self.S
        d = X0.shape[-1]
        if self.force is None:  # the first step: CanonicalProblem.force(X, A)
            force0 = self._force(X0, A0, X0 @ self.M, X0 @ self.M.transpose(0, 2, 1))
        else:
            force0 = self.force
        P_half = P0 + tau * force0
        X1 = X0 + self.drift * P_half
        X1MMt = X1 @ self.MMt
        X1M, X1Mt = X1MMt[..., :d], X1MMt[..., d:]
        S1 = np.matmul(X1M, X1.transpose(0, 2, 1))
        rates = self._rates(X0, P0, X1, P_half + tau * force0, X1M)
        Z1 = rates(self.bb0, self.bb1)  # S cubic in time (Hermite)
        self._axpy(self.Eh, Z0, Z1)
        self._axpy(self.ba0, S0, Z1)
        self._axpy(self.ba1, S1, Z1)
        np.subtract(Z1, en.max_reduce(Z1, -1, keepdims=True), out=Z1)
        A1 = np.exp(Z1)
        A1 *= np.divide(1.0, en.sum_reduce(A1, -1))[..., None]
        force1 = self._force(X1, A1, X1M, X1Mt)
        P1 = P_half + tau * force1
        D0 = self._rate(A0, Z0, S0) if self.first else self.D
        D1 = self._rate(A1, Z1, S1)
        dissipated = 0.5 * h * (D0 + D1)
        # the transient towards the lagged target (transient.lagged_start, hermite_transient)
        W0 = np.multiply(S0, self.ell_beta)
        W0 += Z0
        self._axpy(self.minus_ell, S1, W0)
        dS = np.subtract(S1, S0)
        Wt = np.subtract(W0, rates(self.bhc0, self.bhc1))
        self._axpy(self.bhc, dS, Wt)
        # after a graded step its chain goes on while the transient still decays
        osc_W0 = self._osc_max(W0)
        chained = self.graded > 0.0
        decaying = chained & ((osc_W0 > GRADED_OSC) | (osc_W0 < self.graded * self.chain_decay))
        transient = decaying | ~(self._osc_max(Wt) <= TRANSIENT_OSC)
        # graded (a distant start, or its chain): the run's own sub-steps (:meth:`_alone`)
        alone = self.graders & (decaying | (transient & self.first & (osc_W0 > GRADED_OSC)))
        whole = np.flatnonzero(transient & ~alone)  # the transient's mean, on the stacks
        # transient.tracking_correction
        W0c = np.subtract(Wt, np.vecdot(A0, Wt)[..., None])
        cov = self._vdot(A0, W0c * dS)
        var = self._vdot(A0, W0c * W0c)
        mean_D = self.rate * (2.0 * self.ell * cov * self.c1 + var * self.c2)
        dissipated += h * mean_D
        if len(whole):
            A_mean = self._transient_mean(whole, Z0, S0, S1, A0, A1, W0, osc_W0)
            a0, a1 = A0[whole], A1[whole]
            K = 2.0 * (A_mean - 0.5 * (a0 + a1))
            x0 = X0[whole]
            M = self.M[whole]
            kicked = self._force(x0, a0 + K, x0 @ M, x0 @ M.transpose(0, 2, 1), whole)
            P1[whole] += tau * (kicked - force0[whole])
            dissipated[whole] = self._path_dissipation(whole, Z0, S0, A0, Z1, S1, A1, A_mean)
        dissipated = self.dissipated + dissipated
        # the tracking bound (TrackedEtdVerlet.finish): dS/dt at the end, its increment
        V1 = P1 / self.mass_col if self.any_mass else P1
        S1_dot = np.concatenate((V1 @ self.M, X1M), axis=2) @ np.concatenate(
            (X1, V1), axis=2).transpose(0, 2, 1)
        osc1 = en.oscillation(S1_dot)
        if self.first:
            g = np.multiply(osc1, self.w1)
            g += self.w0 * self.osc
        else:
            g = np.multiply(osc1, self.wq2)
            g += self.wq1 * self.osc
            g += self.wq0 * self.before
        Bound = self.decay * self.Bound
        Bound += g
        n = len(X1)
        flat = X1.reshape(n, -1)
        over = np.subtract(np.sqrt(np.vecdot(flat, flat)), self.norm_limit)
        over += 0.0 * dissipated
        over = over[~alone]  # the others are checked by their own engine
        if over.size and not en.max_reduce(over) <= 0.0:
            raise FloatingPointError("a run stops at this step")
        new = {"X": X1, "P": P1, "Z": Z1, "A": A1, "S": S1, "S_dot": S1_dot,
               "Bound": Bound, "dissipated": dissipated, "force": force1, "D": D1,
               "osc": osc1, "graded": np.zeros(n)}
        keep = np.ones(n, dtype=bool)
        for k in np.flatnonzero(alone):
            keep[k] = self._alone(k, new)
        self.before, self.first = self.osc, False
        for name, value in new.items():
            setattr(self, name, value)
        if self.neg_entropy is None:
            self.neg_entropy = np.zeros(n)  # (the plain step's carry; unused here)
        self.t = self.t + h
        if not keep.all():
            self._keep(keep)

    # -- one run at a time: a step that does not track, or fails for some run ----------
    def _alone(self, k, new) -> bool:
        """Row ``k``'s step by its own engine, from the state before it, into the arrays
        of ``new``; False if the run stops."""
        sim = self.sims[self.rows[k]]
        first = self.first
        sim._state = State(t=self.t, X=self.X[k].copy(), P=self.P[k].copy(),
                           Z=self.Z[k].copy(), A=self.A[k].copy(), S=self.S[k].copy(),
                           S_dot=self.S_dot[k].copy(), B=self.Bound[k].copy(),
                           dissipated=float(self.dissipated[k]), work=float(self.work[k]))
        sim._carry = VerletCarry(
            force=None if first else self.force[k].copy(),
            D=None if first else float(self.D[k]), osc_S_dot=self.osc[k].copy(),
            osc_before=None if first else (self.h, self.before[k].copy()),
            graded_osc=float(self.graded[k]))
        law, sim.law = sim.law, None  # the law is watched where a run watches it
        sim.advance(1)
        sim.law = law
        self.alone_steps += 1
        st, carry = sim._state, sim._carry
        for name, value in (("X", st.X), ("P", st.P), ("Z", st.Z), ("A", st.A), ("S", st.S),
                            ("S_dot", st.S_dot), ("Bound", st.B),
                            ("dissipated", st.dissipated)):
            new[name][k] = value
        if sim.status != "running":
            return False
        new["force"][k], new["D"][k] = carry.force, carry.D
        new["osc"][k], new["graded"][k] = carry.osc_S_dot, carry.graded_osc
        return True

    def step_alone(self):
        """This step row by row through each run's own engine; runs that stop leave."""
        n = len(self.rows)
        new = {name: getattr(self, name).copy() for name in (
            "X", "P", "Z", "A", "S", "S_dot", "Bound", "dissipated", "D", "osc", "graded")}
        new["force"] = (np.empty_like(self.X) if self.force is None else self.force.copy())
        keep = np.array([self._alone(k, new) for k in range(n)], dtype=bool)
        self.before, self.first = self.osc, False
        for name, value in new.items():
            setattr(self, name, value)
        if self.neg_entropy is None:
            self.neg_entropy = np.zeros(n)
        self.t = self.t + self.h
        if not keep.all():
            self._keep(keep)


__all__ = ["StiffBatch"]
