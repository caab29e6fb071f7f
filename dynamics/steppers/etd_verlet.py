"""Velocity Verlet for ``(X, P)`` with the exact logit step for ``Z`` (canonical and
value-matching models).

Features: kick, drift, kick. Logits: the exact step with the effective scores linear in
time between both ends, so the lag ``−βṠ/λ`` of attention behind its target is resolved
while ``λh`` is moderate; for ``λh ≫ 1`` a linear target leaves an ``O(h T̈/λ)`` lag
error, so stiff steps take the scores cubic in time (value matching's while its feedback
is not strong; see STIFF.md). The kicks and the
dissipation use the trapezoidal rule, plus on a stiff step the share of the transient of
attention towards its lagged target that the rule misses (:mod:`.transient`): to first
order while attention tracks that target, else (a fast transient from a distant start)
the mean attention of the step integrated in ``u = e^{−λs}``, which corrects the second
kick, and the dissipation from the free-energy balance along the step's path.

The scheme calls the model's force ``problem.force(X, A, XM, XMt) -> (Ṗ, G)``; when the
effective scores depend on attention (``problem.attention_feedback``: value matching,
``Ŝ = G Xᵀ``) it predicts ``A`` at the end first, and solves the feedback implicitly
(:mod:`.feedback`) on a stiff step or when it is strong. Its ``Ŝ`` at the end of a step
(from the attention reached, not the prediction) is carried to the next. A fast transient
of a stiff step from a distant start (value matching's while its feedback has a gain, the
canonical model's) is taken in sub-steps that resolve it (:meth:`EtdVerlet.graded`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .. import energy as en
from ..energy import max_reduce
from ..logits import (
    axpy,
    centre_rows,
    exp_quadratic,
    exp_trapezoid,
    hermite_logit_weights,
    logit_coefficients,
    logit_dissipation_rate,
    logit_step,
)
from ..state import State
from ..workspace import Owned, Workspace
from .base import Stepper
from .exact_logit import STIFF_LAMBDA_H
from .feedback import feedback_work, implicit_step, trapezoid_feedback_work
from .grading import (
    CHAIN_SUBSTEPS,
    GRADED_FIRST,
    GRADED_MIN_LAMBDA_H,
    GRADED_SUBSTEPS,
    fresh,
    graded_on,
    substeps,
)
from .transient import (
    CUBIC_LAMBDA_H,
    hermite_lag,
    hermite_transient,
    lagged_start,
    neg_entropy,
    path_dissipation,
    tracking_correction,
    tracks,
    transient_mean,
    trapezoid_path_dissipation,
)
from .verlet_carry import Constants, VerletCarry

#: Largest step × attention-feedback gain the explicit prediction of value matching takes.
FEEDBACK_GAIN_STEP = 0.25
#: Value matching grades a start and its chain as :mod:`.grading` says (``rate = λ +
#: gain``; from ``GRADED_MIN_LAMBDA_H`` up, sub-steps of at most ``h / GRADED_SUBSTEPS``,
#: ``h / CHAIN_SUBSTEPS`` in the chain: a start's first 100 steps at N = 64, d = 16 took
#: 0.17 s at λh = 0.06, 0.34 s at 0.2, 1.49 s and 0.67 s graded from 0.05 in h/32) while the
#: feedback's gain is at most ``GRADED_GAIN λ`` (λh = 1, 10, 100 there: 1.03 λ); there its
#: stiff steps also take ``Ŝ`` cubic in time.
#: A stronger feedback dominates the relaxation, and ``W₀``, measured against the frozen
#: relaxation's lagged target, stays large on every step (25 … 340 at β = 5, γ = 20, κ = 3,
#: gain up to 33 λ): graded as above, every step of those runs took 32 sub-steps or more.
#: They keep the earlier grading, on every step with a large transient (noisy or not):
#: from ``λh`` = ``GRADED_LAMBDA_H`` up, uncapped, the sub-steps under ``STIFF_LAMBDA_H`` on
#: the trapezoidal rule.
GRADED_GAIN = 4.0
GRADED_LAMBDA_H = 0.25


class EtdVerlet(Stepper):
    """Velocity Verlet with the exact logit step (see the module docstring)."""

    order = 2
    #: Every step takes the dissipation rate at the new logits: a non-finite logit either
    #: raises or makes the dissipated energy non-finite (the engine need not sum ``Z``).
    logits_in_dissipation = True

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()
        self.owned = Owned()
        self._constants = None

    def start(self, state):
        return VerletCarry()

    def constants(self, h: float) -> Constants:
        """The scalars of a step of size ``h`` (kept while ``h`` stays)."""
        c = self._constants
        if c is not None and c.h == h:
            return c
        prob = self.problem
        beta, lam = prob.beta, prob.relaxation_rate
        w0, w1 = exp_trapezoid(lam, h)
        wq = tuple(beta * w for w in exp_quadratic(lam, h)) if lam * h > STIFF_LAMBDA_H else None
        c = self._constants = Constants(
            h=h, beta=beta, lam=lam, logit=logit_coefficients(beta, lam, h),
            lag=-(beta / (lam * h)), decay=math.exp(-lam * h), w0=beta * w0, w1=beta * w1,
            MMt=np.concatenate((prob.M, prob.M.T), axis=1), wq=wq,
            hermite=hermite_logit_weights(lam, h) if lam * h > CUBIC_LAMBDA_H else None)
        return c

    def perturbed(self, state, carry, spread):
        """Noisy logits (rule 8): the force, ``G``, ``Ŝ`` and ``D`` (from the old
        attention) go, and a graded start's chain ends (the kick is no distant start);
        what came from ``(X, P)`` stays."""
        return state, replace(carry, force=None, G=None, D=None, S_hat=None, graded_osc=0.0,
                              continued=True, neg_entropy=None)

    def continued(self, carry):
        """A run continued after a setting change (rule 9): no distant start."""
        return replace(carry, continued=True)

    def feedback_gain(self, st) -> float:
        """Gain of value matching's attention feedback: the logit Jacobian holds
        ``−γκ (diag A_i − A_iA_iᵀ) X W_VᵀW_V Xᵀ``, whose norm is at most
        ``γκ max(A) ‖X W_Vᵀ‖₂²`` (0 without feedback)."""
        prob = self.problem
        if not (prob.attention_feedback and prob.kappa > 0):
            return 0.0
        XW = st.X @ prob.W_V.T  # ‖XW_Vᵀ‖₂² = λ_max of the d×d Gram matrix
        return (prob.gamma * prob.kappa * float(st.A.max())
                * float(np.linalg.eigvalsh(XW.T @ XW)[-1]))

    def step(self, st, carry, h):
        gain = self.feedback_gain(st)
        X1, P1, Z1, A1, S1, carry1, X1M, dissipated, transient = self.verlet(st, carry, h,
                                                                             gain=gain)
        lam = self.problem.relaxation_rate
        fine = gain <= GRADED_GAIN * lam
        # value matching with κ = 0 grades nothing (its feedback has no gain)
        graders = gain > 0.0 or not self.problem.attention_feedback
        if transient and graders and lam * h >= (GRADED_MIN_LAMBDA_H if fine
                                                 else GRADED_LAMBDA_H):
            cap = (GRADED_SUBSTEPS if fresh(carry) else CHAIN_SUBSTEPS) if fine else 1
            X1, P1, Z1, A1, S1, carry1, X1M, dissipated = self.graded(st, carry, h,
                                                                      lam + gain, fine, cap)
            carry1 = replace(carry1, graded_osc=transient if fine else 0.0)
        new = State(t=st.t + h, X=X1, P=P1, Z=Z1, A=A1, S=S1, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated + dissipated, work=st.work)
        return self.track(st, carry, new, carry1, X1M, h)

    def graded(self, st, carry, h, rate, fine, n_substeps):
        """A stiff step with a fast transient (value matching's, or the canonical model's
        from a distant start), in sub-steps that resolve it: the first of
        ``GRADED_FIRST / rate`` (``rate = λ + gain``), each next twice as long, none longer
        than ``h / n_substeps``; if ``fine`` (see :data:`GRADED_GAIN`), each on the stiff
        branch of :meth:`verlet`. The feedback speeds the transient's decay up, which the
        frozen relaxation of :mod:`.transient` leaves out. Returns what :meth:`verlet`
        returns, without its flag."""
        dissipated, sub, t = 0.0, st, 0.0
        sub_carry = replace(carry, graded_osc=0.0)
        for delta in substeps(h, GRADED_FIRST / rate, h / n_substeps):
            busy = (st.S, st.Z, st.A, carry.S_hat, sub.S, sub.Z, sub.A, sub_carry.S_hat)
            X1, P1, Z1, A1, S1, sub_carry, X1M, d, _ = self.verlet(
                sub, sub_carry, delta, busy, gain=self.feedback_gain(sub), substep=fine)
            dissipated += d
            t += delta
            sub = State(t=st.t + t, X=X1, P=P1, Z=Z1, A=A1, S=S1)
        return X1, P1, Z1, A1, S1, sub_carry, X1M, dissipated

    def track(self, st, carry, new, new_carry, X1M, h):
        """Hook for the tracking bound (see :class:`~.tracked_verlet.TrackedEtdVerlet`)."""
        return new, new_carry

    def verlet(self, st, carry, h, busy=(), gain=0.0, substep=False):
        """One step. Returns ``X₁, P₁, Z₁, A₁, S₁``, the new carry, ``X₁M``, the energy
        dissipated and, when the step carried a fast transient from a distant start
        (:func:`~.grading.graded_on`),
        its ``osc(W₀)`` (else 0). ``busy``: arrays the stepper's ring must not hand out
        (those of the state a sub-step started from);
        ``gain``: :meth:`feedback_gain` at ``st``; value matching solves its feedback
        implicitly on a stiff step (``λh`` above ``STIFF_LAMBDA_H``, or a ``substep`` of
        :meth:`graded`) or when ``gain·h`` exceeds ``FEEDBACK_GAIN_STEP``."""
        prob, work = self.problem, self.work
        c = self.constants(h)
        beta, lam, tau, coef = c.beta, c.lam, 0.5 * h, c.logit
        shape = st.Z.shape
        vm = prob.attention_feedback
        stiff = substep or lam * h > STIFF_LAMBDA_H
        predicted = False  # value matching's Ŝ₁ from a prediction of A₁
        cubic = False  # the scores cubic in time (Hermite, from dŜ/dt at both ends)
        force0, G0 = carry.force, carry.G
        if force0 is None or (vm and G0 is None):
            force0, G0 = prob.force(st.X, st.A)
        P_half = st.P + tau * force0
        X1 = st.X + (h / prob.mass) * P_half
        if vm:
            X1M, X1Mt = X1 @ prob.M, None
        else:  # X₁M and X₁Mᵀ (for the force) in one product
            X1MMt = X1 @ c.MMt
            X1M, X1Mt = X1MMt[:, :X1.shape[1]], X1MMt[:, X1.shape[1]:]

        # Value matching: the new state's arrays come from the stepper's own ring (fresh
        # N×N arrays cost page faults: measured 1.9 vs 2.5 times its floor at N = 1024).
        # The canonical step keeps fresh ones: reused, they measured slower (2.0 vs 1.5 at
        # N = 256 and 512).
        def owned(name):
            return self.owned.take(name, shape, busy) if vm else None

        S1 = np.matmul(X1M, X1.T, out=owned("etd.S"))
        if vm:  # Ŝ depends on A: predict A at the end first
            S_hat0 = carry.S_hat
            if S_hat0 is None:
                S_hat0 = np.matmul(G0, st.X.T, out=work.get("vm.S0", shape))
            A_pred = logit_step(st.Z, S_hat0, S_hat0, beta, lam, h, out=work.get("vm.A", shape),
                                coef=coef)
            A_pred = en.rowsoftmax(A_pred, centred=True, out=A_pred)
            predicted = not (stiff or gain * h > FEEDBACK_GAIN_STEP)
            if not predicted:
                outs = (owned("etd.Z"), owned("etd.A"), owned("etd.Sh"))
                Z1, A1, S_hat1 = implicit_step(prob, st.Z, S_hat0, X1, X1M, A_pred, coef,
                                               work, outs)
                if stiff and lam * h > CUBIC_LAMBDA_H and gain <= GRADED_GAIN * lam:
                    # Ŝ cubic in time, from its rates at both ends (at the end from the
                    # linear step's state; further passes moved ∫D by under 1e-6): linear,
                    # it leaves attention lagging by O(h Ŝ̈/λ) (∫D at λh = 10 of order 1.63,
                    # now 2.6). A stronger feedback (β = 5, γ = 20, κ = 3) lost order there.
                    S0_dot = prob.score_rate(st.X, st.P / prob.mass, st.Z, st.A, S_hat0)
                    E, a0, a1, b0, b1 = c.hermite
                    P1_est = P_half + tau * prob.force(X1, A1, X1M)[0]
                    S1_dot = prob.score_rate(X1, P1_est / prob.mass, Z1, A1, S_hat1)
                    rates = (beta * b0) * S0_dot + (beta * b1) * S1_dot
                    Z1, A1, S_hat1 = implicit_step(prob, st.Z, S_hat0, X1, X1M, A1,
                                                   (E, beta * a0, beta * a1), work, outs, rates)
                    cubic = True
            else:
                R_pred = X1 - A_pred @ (X1 @ prob.W_V.T)
                S_hat1 = np.matmul(X1M + prob.kappa * (R_pred @ prob.W_V), X1.T,
                                   out=work.get("vm.S1", shape))
                Z1 = None
        else:
            S_hat0, S_hat1, Z1 = st.S, S1, None
            if stiff and lam * h > CUBIC_LAMBDA_H:
                # S cubic in time (issue #31), as value matching's Ŝ: linear, it leaves attention
                # lagging by O(h S̈/λ) (∫D at λh = 100 of order 1.78 on the sup of the error over
                # the run, local orders 1.99, 1.95, 1.81, 1.74 at dt = 0.01 … 0.000625, fitted on
                # the last three; now 1.94: 2.0, 1.98, 1.96, 1.92). dS/dt at the start from (X₀,
                # P₀); at the end from X₁ and the momenta P_half + τ·Ṗ₀, off by O(h²) (with Ṗ at the
                # linear step's attention instead, ∫D moved by under 10 %); they enter Z₁ with
                # weights of order min(h, 1/λ), and the logits relax.
                # The start's error grew (sup at dt = 0.01: 2.2e-5 → 9.0e-5 at λh = 100,
                # 2.7e-5 → 9.6e-5 at 10): off the lagged path (A(0) = A*), its tracking
                # correction's remainder was partly offset by the linear step's lag. (Taken
                # whole instead, with transient_mean, the start's error fell 8 times but the
                # next steps of its transient broke the order at λh ≈ 0.6.)
                rates = _score_rates(prob, st.X, st.P, X1, P_half + tau * force0, X1M)
                E, a0, a1, b0, b1 = c.hermite
                Z1 = rates(beta * b0, beta * b1)
                axpy(E, st.Z, Z1)
                axpy(beta * a0, S_hat0, Z1)
                axpy(beta * a1, S_hat1, Z1)
                cubic = True
                Z1 = centre_rows(Z1, out=Z1)
                A1 = en.rowsoftmax(Z1, centred=True)
        if Z1 is None:
            Z1 = logit_step(st.Z, S_hat0, S_hat1, beta, lam, h, coef=coef, out=owned("etd.Z"))
            A1 = en.rowsoftmax(Z1, centred=True, out=owned("etd.A"))
        force1, G1 = prob.force(X1, A1, X1M, X1Mt)

        def rate_at(A, Z, S, D=None):
            return D if D is not None else logit_dissipation_rate(A, Z, S, beta, lam, work)

        if vm and predicted:  # Ŝ₁ of the logit step came from the prediction of A₁
            S_hat1 = np.matmul(G1, X1.T, out=owned("etd.Sh"))
        P1 = P_half + tau * force1
        if not stiff:  # ∫D from the balance (below), no D: the carry is no start
            n1 = neg_entropy(A1, Z1)
            carry1 = VerletCarry(force1, G1, None, S_hat1 if vm else None, continued=True,
                                 neg_entropy=n1)
        else:
            D0 = rate_at(st.A, st.Z, S_hat0, carry.D)
            D1 = rate_at(A1, Z1, S_hat1)
            carry1 = VerletCarry(force1, G1, D1, S_hat1 if vm else None)
            dissipated = 0.5 * h * (D0 + D1)  # the trapezoidal rule ...
        if not stiff:  # ... but below the stiff branch from the balance (issue #31):
            # ``∫D`` from the free-energy balance along the step
            # (:func:`~.transient.path_dissipation` with the trapezoidal mean ``(A₀ + A₁)/2``,
            # value matching's less ``κ`` :func:`~.feedback.feedback_work`), as a stiff step
            # with a fast transient takes it, not from the trapezoidal rule on ``D``, which does
            # not resolve a fast start transient just below ``STIFF_LAMBDA_H`` (``D`` decays at
            # about 2λ, value matching's at up to 2(λ + gain), gain up to 33 λ at β = 5, γ = 20,
            # κ = 3). From uniform attention at λh = 0.04 (β = 5, γ = 20; N = 6, d = 3, seed 8)
            # ∫D at t = 2 was off by 6.3e-3 relative with κ = 3 (order 2, error/dt² = 64
            # against 1.6 on the stiff branch just above: a jump of 40 at λh = 0.05), 1.9e-3
            # for the canonical model; by the balance 2.3e-4 (error/dt² 2.3, order 2.0 down to
            # dt = 0.00125) and 1.7e-4 for the canonical model (error/dt² 1.7); on β ∈ {1, 5},
            # γ ∈ {1, 5, 20} every diagnostic is within 3.6e-4 for value matching's κ ∈ {0, 1,
            # 3, 5} and 5.3e-4 for the canonical model (its tracking bound;
            # ``tests/test_stiff_accuracy.py``). Taken only
            # above a threshold of ``(λ + gain)h`` instead, the two rules' errors mixed and the
            # order broke (∫D stalled at 1e-4 from dt = 0.005 down with a threshold of 0.1).
            # The states are unchanged. The price: a smooth run's ∫D is less accurate (the
            # defaults at t = 1, both of order 2: value matching's 8.7e-5 relative, now 1.6e-4;
            # the canonical model's 8.0e-5, now 1.1e-4), and the energy residual no longer
            # gains from ∫D's error offsetting H's (the canonical β quench of the tour, t = 5:
            # 3.6e-4, now 1.5e-3). 200 steps at N = 64, d = 16 (CPU time, one BLAS thread):
            # value matching (κ = 1) 17 % more (Σ A log A once a step, carried, and two more
            # N×N×d products for the feedback's work, in place of D), the canonical model the
            # same (0.029 … 0.031 s before and after: Σ A log A in place of D; the batch
            # engine, 32 runs at N = 16, d = 8: 0.168 → 0.170 s). The batch engine
            # (:class:`~dynamics.batch.CanonicalBatch`) takes the same balance, bit for bit.
            n0 = carry.neg_entropy
            n0 = neg_entropy(st.A, st.Z) if n0 is None else n0
            dissipated = trapezoid_path_dissipation(S_hat0, st.A, n0, S_hat1, A1, n1, beta)
            if vm and prob.kappa:
                dissipated -= prob.kappa * trapezoid_feedback_work(prob.W_V, st.X, X1, st.A, A1)
            return X1, P1, Z1, A1, S1, carry1, X1M, dissipated, 0.0
        # ... and on a stiff step the share of the transient towards the lagged target
        W0 = lagged_start(st.Z, S_hat0, S_hat1, beta, c.lag, work.get("etd.W0", shape))
        dS = np.subtract(S_hat1, S_hat0, out=work.get("etd.dS", shape))
        Wt = W0
        if cubic and not vm:  # the rates' share in one product (see _score_rates)
            hc, hc0, hc1 = hermite_lag(lam, h)
            Wt = np.subtract(W0, rates(beta * hc0, beta * hc1), out=work.get("etd.Wt", shape))
            axpy(-beta * hc, dS, Wt)
        elif cubic:
            Wt = hermite_transient(W0, dS, S0_dot, S1_dot, beta, lam, h,
                                   work.get("etd.Wt", shape))
        # osc(W₀) only where it is read: after a graded step, and on a transient (a step
        # that tracks keeps the quick test of :func:`tracks`)
        osc_W0 = float(max_reduce(en.oscillation(W0), None)) if carry.graded_osc else None
        decaying = osc_W0 is not None and graded_on(osc_W0, carry.graded_osc, lam * h)
        if not decaying and tracks(Wt, work.get("etd.dev", shape)):
            tr = tracking_correction(st.A, Wt, dS, lam * h, lam / beta, c.lag, work)
            return X1, P1, Z1, A1, S1, carry1, X1M, dissipated + h * tr.mean_D, 0.0
        A_mean, _ = transient_mean(st.Z, S_hat0, S_hat1, st.A, A1, W0, beta, lam, h, work,
                                   "etd")
        # the kicks weigh A₀ and A₁ by h/2 each; the rest of the step's mean goes here
        K = 2.0 * (A_mean - 0.5 * (st.A + A1))
        P1 += tau * (prob.force(st.X, st.A + K)[0] - force0)
        dissipated = path_dissipation(st.Z, S_hat0, st.A, Z1, S_hat1, A1, A_mean, beta)
        if vm:
            dissipated -= prob.kappa * feedback_work(prob.W_V, st.X, X1, st.A, A1, A_mean)
        if osc_W0 is None:
            osc_W0 = float(max_reduce(en.oscillation(W0), None))
        # a distant start, or any large transient under a strong feedback (see GRADED_GAIN)
        start = fresh(carry) or gain > GRADED_GAIN * lam
        graded = decaying or graded_on(osc_W0, 0.0, lam * h, start)
        return X1, P1, Z1, A1, S1, carry1, X1M, dissipated, osc_W0 if graded else 0.0


def _score_rates(prob, X0, P0, X1, P1, X1M):
    """``rates(w₀, w₁) = w₀ dS/dt(t₀) + w₁ dS/dt(t₁)``, ``dS/dt = V M Xᵀ + X M Vᵀ`` with
    ``V = P/m`` at both ends, as one product of width ``4d`` (a stiff canonical step takes
    two such sums: its logits and its transient)."""
    M, mass = prob.M, prob.mass
    V0, V1 = P0 / mass, P1 / mass
    V0M, V1M, X0M = V0 @ M, V1 @ M, X0 @ M

    def rates(w0, w1):
        left = np.concatenate((w0 * V0M, X0M, w1 * V1M, X1M), axis=1)
        return left @ np.concatenate((X0, w0 * V0, X1, w1 * V1), axis=1).T

    return rates
