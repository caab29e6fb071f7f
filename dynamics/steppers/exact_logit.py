"""The exact logit step on a prescribed feature path (attention-only model).

Logits: the exact step for scores cubic in time, from the path's ``S`` and ``dS/dt`` at
both ends (:func:`~dynamics.logits.hermite_logit_step`): on a stiff step (``λh`` above
0.05) the linear one leaves attention lagging by ``O(h S̈/λ)``, first order in ``h`` at a
fixed relaxation rate, and below the branch its ``O(h²)`` error held the work to 2.3e-3
relative (issue #31). Below the stiff branch the work ``−∫⟨A, dS/dt⟩`` takes the
trapezoidal rule with its end correction and ``∫D`` the free-energy balance at the
trapezoidal mean ``(A₀ + A₁)/2`` with its third-order term (:func:`balance_rates`). On a
stiff step both take the trapezoidal rule plus the share of the transient of attention
towards its lagged target that the rule misses (:mod:`.transient`): to first order while
attention tracks that target, else (a fast transient) from the step's mean attention
integrated in ``u = e^{−λs}``, the dissipation then from the free-energy balance along the
step's path. The tracking bound's update integrates ``osc(dS/dt)`` quadratic through the
previous step's value (its lag ``q/λ − q′/λ²`` needs ``q′`` at the step's end; linear on
a step after a start, a jump or a change of step). A jump of the path is stepped onto, and
its work (with attention frozen) is added exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import energy as en
from ..logits import (
    axpy,
    exp_quadratic,
    exp_trapezoid,
    hermite_logit_step,
    logit_dissipation_rate,
    score_rate,
)
from ..state import State
from ..workspace import Workspace
from .base import Stepper
from .transient import (
    hermite_transient,
    lagged_start,
    neg_entropy,
    path_dissipation,
    tracking_correction,
    tracks,
    transient_mean,
    trapezoid_path_dissipation,
)

#: Above this λh the steps integrate the relaxation's transients exactly (in u = e^{−λs});
#: below it the trapezoidal rule is second order.
STIFF_LAMBDA_H = 0.05


@dataclass(frozen=True)
class LogitCarry:
    """What the next step reuses: ``D`` (after a stiff step) or ``Σ A log A`` (after one
    below the stiff branch), ``⟨A, dS/dt⟩`` and ``osc(dS/dt)`` at the state, and
    ``(h, osc(dS/dt))`` one step of ``h`` before it (a stiff step's tracking bound)."""

    D: float | None = None
    A_S_dot: float | None = None
    osc_S_dot: np.ndarray | None = None
    before: tuple | None = None
    neg_entropy: float | None = None
    #: :func:`balance_rates` at the state (after a step below the stiff branch), or None
    rates: tuple | None = None


class ExactLogit(Stepper):
    """The exact logit step with work and dissipation; the path gives ``X(t)``, ``Ẋ(t)``."""

    order = 2

    def __init__(self, problem):
        super().__init__(problem)
        self.work = Workspace()

    def start(self, state):
        return LogitCarry()

    def perturbed(self, state, carry, spread):
        """Noisy logits (rule 8): ``D``, ``Σ A log A`` and ``⟨A, dS/dt⟩`` go; the bound
        grows by ``spread``."""
        return replace(state, B=state.B + spread), replace(carry, D=None, A_S_dot=None,
                                                             neg_entropy=None, rates=None)

    def step(self, st, carry, h):
        prob, path, work_ = self.problem, self.problem.path, self.work
        beta, lam = prob.beta, prob.relaxation_rate
        jump = next((ts for ts in path.jumps if st.t < ts <= st.t + h * (1 + 1e-9)), None)
        if jump is not None:
            h = jump - st.t
        t1 = jump if jump is not None else st.t + h
        X1, X1_dot = path(np.nextafter(t1, -np.inf) if jump is not None else t1)
        X1M = X1 @ prob.M
        S1 = X1M @ X1.T
        S1_dot = score_rate(X1, X1_dot, prob.M, X1M)
        stiff = lam * h > STIFF_LAMBDA_H
        # exact for scores cubic in time: no O(h/λ) lag on a stiff step; below the stiff
        # branch the linear step's O(h²) error of the logits held the work of the converging
        # path to 3.3e-3 relative even with the end correction (β = γ = 1; N = 6, d = 3,
        # seed 8, t = 2)
        Z1 = hermite_logit_step(st.Z, st.S, S1, st.S_dot, S1_dot, beta, lam, h)
        A1 = en.rowsoftmax(Z1, centred=True)
        a_sdot0 = carry.A_S_dot
        if a_sdot0 is None:
            a_sdot0 = float(np.vdot(st.A, st.S_dot))
        a_sdot1 = float(np.vdot(A1, S1_dot))
        # trapezoidal rule: second order while the relaxation is resolved, and at any λh
        # for the slow motion of attention on its lagged target
        work = -0.5 * h * (a_sdot0 + a_sdot1)
        D1 = n1 = rates1 = None
        if stiff:
            D0 = carry.D if carry.D is not None else logit_dissipation_rate(
                st.A, st.Z, st.S, beta, lam, work_)
            D1 = logit_dissipation_rate(A1, Z1, S1, beta, lam, work_)
            dissipated = 0.5 * h * (D0 + D1)
        else:
            # ∫D from the free-energy balance at the trapezoidal mean (A₀ + A₁)/2, as the
            # canonical and value-matching steps below the stiff branch take it (issue #31):
            # the trapezoidal rule on D, which decays at about 2λ, did not resolve a fast
            # start transient just below STIFF_LAMBDA_H (β = 5, γ = 20, λh = 0.04; N = 6,
            # d = 3, seed 8; t = 2: ∫D off by up to 3.9e-3 relative over the six paths from
            # uniform, A* or random attention; then 3.9e-4, ``tests/test_stiff_accuracy.py``;
            # the defaults' at t = 1: 3.8e-5, then 3.0e-5; 200 steps at N = 64, d = 16:
            # 0.026 s either way, Σ A log A in place of D) ... and both the work and ∫D with
            # their third-order terms (balance_rates): on the grid of the test the work erred
            # by up to 2.3e-3 relative, ∫D by 3.9e-4; now by 4.8e-6 and 1.4e-5, and ∫D's error
            # no longer jumps at the threshold (error/dt² about 3 just below, 0.03 above on
            # the oscillation path; now 0.05 and 0.03). The price, 200 steps (CPU time, one
            # BLAS thread): N = 64, d = 16: 0.025 → 0.039 s; N = 256: 0.20 → 0.35 s.
            n0 = carry.neg_entropy
            n0 = neg_entropy(st.A, st.Z) if n0 is None else n0
            n1 = neg_entropy(A1, Z1)
            dissipated = trapezoid_path_dissipation(st.S, st.A, n0, S1, A1, n1, beta)
            rates0 = carry.rates
            dS_h = np.subtract(S1, st.S, out=work_.get("att.dS", S1.shape))
            dS_h /= h
            if rates0 is None:  # d²S/dt² at the start of the step's cubic
                rates0 = balance_rates(st.A, st.Z, st.S, st.S_dot, dS_h, S1_dot, h, beta,
                                       lam, work_)
            rates1 = balance_rates(A1, Z1, S1, S1_dot, dS_h, st.S_dot, -h, beta, lam, work_)
            work -= h * h / 12.0 * (rates0[0] - rates1[0])
            dissipated -= h**3 / 24.0 * (rates0[1] + rates1[1])
        if stiff:  # the share of the transient the rule misses
            work, dissipated = self._transient(st, t1, Z1, S1, S1_dot, A1, a_sdot0, a_sdot1,
                                               h, work, dissipated)
        osc0 = carry.osc_S_dot
        osc0 = en.oscillation(st.S_dot) if osc0 is None else osc0
        osc1 = en.oscillation(S1_dot)
        B = math.exp(-lam * h) * st.B
        if carry.before is not None and carry.before[0] == h:
            # B lags osc(dS/dt) by 1/λ: from q″ too; below the stiff branch as well, so that
            # its rule does not change there (linear below, its error/dt² measured 1.75 just
            # below and 0.25 just above on the oscillation path at β = 5, γ = 20)
            wb, w0, w1 = exp_quadratic(lam, h)
            B += beta * (wb * carry.before[1] + w0 * osc0 + w1 * osc1)
        else:
            w0, w1 = exp_trapezoid(lam, h)
            B += beta * (w0 * osc0 + w1 * osc1)
        if jump is not None:  # the jump does work with attention frozen
            X1, X1_dot = path(t1)
            S_new = en.scores(X1, prob.M)
            work -= float(np.sum(A1 * (S_new - S1)))
            B = B + beta * en.oscillation(S_new - S1)
            S1, S1_dot = S_new, score_rate(X1, X1_dot, prob.M)
            new_carry = LogitCarry()
        else:
            new_carry = LogitCarry(D=D1, A_S_dot=a_sdot1, osc_S_dot=osc1, before=(h, osc0),
                                   neg_entropy=n1, rates=rates1)
        new = State(t=t1, X=X1, P=st.P, Z=Z1, A=A1, S=S1, S_dot=S1_dot, B=B,
                    dissipated=st.dissipated + dissipated, work=st.work + work)
        return new, new_carry

    def _transient(self, st, t1, Z1, S1, S1_dot, A1, a_sdot0, a_sdot1, h, work,
                   dissipated):
        """Work and dissipation of a stiff step with the transient of attention towards its
        lagged target (:mod:`.transient`): the trapezoidal rule's ``work`` and
        ``dissipated`` corrected to first order in the transient while attention tracks
        that target; else Simpson's rule on the step's path (``dS/dt`` from the path at the
        middle) plus the rest of the mean attention, and ``∫D`` from the balance."""
        prob, work_ = self.problem, self.work
        beta, lam, shape = prob.beta, prob.relaxation_rate, st.Z.shape
        ell = -beta / (lam * h)
        W0 = lagged_start(st.Z, st.S, S1, beta, ell, work_.get("att.W0", shape))
        dS = np.subtract(S1, st.S, out=work_.get("att.dS", shape))
        # the transient's share of the mean attention, at the start: weighted with dS/dt(t₀)
        # … measured from the logits' path for scores cubic in time (that of the step):
        # linear, a steady lag O(h S̈/λ) would count as a transient
        Wt = hermite_transient(W0, dS, st.S_dot, S1_dot, beta, lam, h,
                               work_.get("att.Wt", shape))
        if tracks(Wt, work_.get("att.dev", shape)):
            tr = tracking_correction(st.A, Wt, dS, lam * h, lam / beta, ell, work_)
            return work - h * tr.mean_gain(st.S_dot), dissipated + h * tr.mean_D
        A_mean, A_half = transient_mean(st.Z, st.S, S1, st.A, A1, W0, beta, lam, h, work_,
                                        "att")
        X_half, X_half_dot = prob.path(t1 - 0.5 * h)
        a_sdot_half = float(np.vdot(A_half, score_rate(X_half, X_half_dot, prob.M)))
        rest = A_mean - (st.A + 4.0 * A_half + A1) / 6.0
        work = (-h / 6.0 * (a_sdot0 + 4.0 * a_sdot_half + a_sdot1)
                - h * float(np.vdot(rest, st.S_dot)))
        # the balance along the path takes ⟨Ā, ΔS⟩ for ∫⟨A, dS/dt⟩ (exact for S linear in
        # time); the work above has the curvature of S: with ⟨A − Ā, dS/dt − ΔS/h⟩ over the
        # transient, ≈ h S̈/(2λ) per unit of transient, it makes ∫D first order otherwise
        dissipated = (path_dissipation(st.Z, st.S, st.A, Z1, S1, A1, A_mean, beta)
                      + float(np.vdot(A_mean, dS)) + work)
        return work, dissipated




def balance_rates(A, Z, S, S_dot, dS_h, S_dot_other, h, beta, lam, work):
    """``(f′, c)`` at one end of a step below the stiff branch, for its third-order terms:
    ``f′ = d⟨A, dS/dt⟩/dt = ⟨Ȧ, Ṡ⟩ + ⟨A, S̈⟩`` and ``c = ⟨Ȧ, S̈⟩ − ⟨Ä, Ṡ⟩``.

    The work ``−∫⟨A, dS/dt⟩`` takes the trapezoidal rule's end correction
    ``−h²/12 (f₀′ − f₁′)`` (fourth order: the corrections of successive steps telescope,
    each step's end values carried to the next). ``∫D`` from the balance at the trapezoidal
    mean, ``F₀ − F₁ − ⟨Ā, ΔS⟩``, takes ``⟨Ā, ΔS⟩ = ∫⟨A, dS/dt⟩ − h³/12 c`` (``c`` at the
    step's middle, here the mean of both ends: third order).

    With ``Ż = λ(βS − Z)`` and ``Z̈ = λ(βṠ − Ż)``: ``Ȧ = A ∘ u``, ``u = Ż − E_A Ż`` per row,
    and ``Ä = A ∘ (u² − E_A u² + Z̈ − E_A Z̈)``; every term is a sum of row covariances
    under ``A``. The path gives no ``d²S/dt²``: the steps take that of their Hermite cubic
    through ``S`` and ``dS/dt`` at its ends, ``S̈ = (6ΔS/h − 4Ṡ − 2Ṡ_other)/h`` (``O(h²)``,
    as the logit step's scores; ``h < 0`` at the step's end), a step's end values carried
    to the next step's start.

    Parameters
    ----------
    A, Z, S, S_dot : ndarray, shape (N, N)
        Attention, logits, scores and their rate at this end.
    dS_h, S_dot_other : ndarray, shape (N, N)
        ``ΔS/h`` of the step and ``dS/dt`` at its other end.
    h, beta, lam : float
    work : Workspace
    """
    shape = A.shape
    Z_dot = np.multiply(S, beta * lam, out=work.get("br.Zdot", shape))
    Z_dot = axpy(-lam, Z, Z_dot)
    AZ = np.multiply(A, Z_dot, out=work.get("br.AZ", shape))
    mean_Z = AZ.sum(axis=1)  # E_A Ż per row
    mean_S = np.vecdot(A, S_dot)
    mean_S_ddot = (6.0 * np.vecdot(A, dS_h) - 4.0 * mean_S
                   - 2.0 * np.vecdot(A, S_dot_other)) / h
    AZ_S = float(np.vdot(AZ, S_dot))
    cov_S = AZ_S - float(np.dot(mean_Z, mean_S))  # ⟨Ȧ, Ṡ⟩
    cov_S_ddot = ((6.0 * float(np.vdot(AZ, dS_h)) - 4.0 * AZ_S
                   - 2.0 * float(np.vdot(AZ, S_dot_other))) / h
                  - float(np.dot(mean_Z, mean_S_ddot)))  # ⟨Ȧ, S̈⟩
    u2 = np.subtract(Z_dot, mean_Z[:, None], out=Z_dot)
    u2 *= u2
    u2 *= A  # A ∘ u²
    cov_u2 = float(np.vdot(u2, S_dot)) - float(np.dot(u2.sum(axis=1), mean_S))
    S2 = np.multiply(S_dot, S_dot, out=work.get("br.S2", shape))
    var_S = float(np.vdot(A, S2)) - float(np.dot(mean_S, mean_S))
    A_ddot_S = cov_u2 + lam * (beta * var_S - cov_S)  # ⟨Ä, Ṡ⟩
    return cov_S + float(mean_S_ddot.sum()), cov_S_ddot - A_ddot_S
