"""Velocity Verlet for ``(X, P)`` with the exact logit step for ``Z`` (canonical and
value-matching models).

Features: kick, drift, kick. Logits: the exact step with the effective scores linear in
time between both ends, so the lag ``−βṠ/λ`` of attention behind its target is resolved
for any ``λh`` (no order reduction as the relaxation stiffens). While attention tracks
its lagged target (or λh is small) the kicks and the dissipation use the trapezoidal
rule. A stiff step far from that target (a fast transient) uses the attention averaged
over the step instead: the composite trapezoid of ``A`` at ``t, t + h/2, t + h`` plus the
deviation of a frozen relaxation towards the lagged target from its own composite
trapezoid, which carries the transient exactly; dissipation alike.

The scheme calls the model's force ``problem.force(X, A, XM, XMt) -> (Ṗ, G)``; when the
effective scores depend on attention (``problem.attention_feedback``: value matching,
``Ŝ = G Xᵀ``) it predicts ``A`` at the end first, and sub-steps when that feedback is stiff.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import energy as en
from ..energy import _max_reduce
from ..logits import (
    axpy,
    exp_trapezoid,
    logit_coefficients,
    logit_dissipation_rate,
    logit_step,
)
from ..relaxation import relaxation_averages
from ..state import State
from ..workspace import Owned, Workspace
from .base import DeferredOverflow, Stepper, TooStiff
from .exact_logit import STIFF_LAMBDA_H

#: Logits within this oscillation of their lagged target carry no transient.
TRANSIENT_OSC = 1e-2
#: Largest step × attention-feedback gain before sub-stepping.
FEEDBACK_GAIN_STEP = 0.25
#: Most sub-steps one step may take.
MAX_SUBSTEPS = 100
#: Arrays up to this size try the quick sufficient test of :func:`tracks` first.
QUICK_TRACK_SIZE = 4096


def tracks(W0, dev) -> bool:
    """Whether every row oscillation of ``W0`` is at most :data:`TRANSIENT_OSC`.

    Small arrays first try the sufficient test ``max_ij |W0_ij − W0_i0| ≤ 0.49 osc``
    (one full reduction instead of two row reductions and a third): with rounding, both
    halves of the oscillation then stay below half the limit. The exact test decides
    whenever it fails, so the answer is always that of the exact test. ``dev`` is scratch
    shaped like ``W0``.
    """
    if W0.size <= QUICK_TRACK_SIZE:
        dev = np.subtract(W0, W0[:, :1], out=dev)
        if float(_max_reduce(np.abs(dev, out=dev), None)) <= 0.49 * TRANSIENT_OSC:
            return True
    return float(_max_reduce(en.oscillation(W0), None)) <= TRANSIENT_OSC


@dataclass(frozen=True)
class Constants:
    """Scalars of a step of size ``h`` with one problem."""

    h: float
    beta: float
    lam: float
    logit: tuple  # logit_coefficients(beta, lam, h)
    lag: float  # −β/(λh)
    decay: float  # e^{−λh}
    w0: float  # β × the exponential trapezoid weights
    w1: float
    MMt: np.ndarray  # [M, Mᵀ], shape (d, 2d)


@dataclass(frozen=True)
class Pending:
    """Steps whose ``dS/dt`` and tracking bound are computed together at the next
    :meth:`TrackedEtdVerlet.finish`: the state they started from, its carry, and per
    step the new state and its ``X M``."""

    constants: Constants
    base: State
    base_carry: object
    states: tuple
    XMs: tuple


@dataclass(frozen=True)
class VerletCarry:
    """What the next step reuses: the force at the state, value matching's ``G`` and the
    dissipation rate ``D`` (canonical)."""

    force: np.ndarray | None = None
    G: np.ndarray | None = None
    D: float | None = None
    #: ``osc(dS/dt)`` at the state, shape (N,) (tracked steps)
    osc_S_dot: np.ndarray | None = None
    #: steps whose ``dS/dt`` and bound wait for :meth:`TrackedEtdVerlet.finish`
    pending: Pending | None = None


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
        c = self._constants = Constants(
            h=h, beta=beta, lam=lam, logit=logit_coefficients(beta, lam, h),
            lag=-(beta / (lam * h)), decay=math.exp(-lam * h), w0=beta * w0, w1=beta * w1,
            MMt=np.concatenate((prob.M, prob.M.T), axis=1))
        return c

    def substeps(self, st, h) -> int:
        """Sub-steps of a step: value matching feeds attention back into its own target;
        the logit Jacobian holds ``−γκ (diag A_i − A_iA_iᵀ) X W_VᵀW_V Xᵀ``, whose norm is at
        most ``γκ max(A) ‖X W_Vᵀ‖₂²``; sub-step so that this gain × step stays below 1/4."""
        prob = self.problem
        if not (prob.attention_feedback and prob.kappa > 0):
            return 1
        XW = st.X @ prob.W_V.T  # ‖XW_Vᵀ‖₂² = λ_max of the d×d Gram matrix
        gain = (prob.gamma * prob.kappa * float(st.A.max())
                * float(np.linalg.eigvalsh(XW.T @ XW)[-1]))
        n_sub = max(1, int(math.ceil(gain * h / FEEDBACK_GAIN_STEP)))
        if n_sub > MAX_SUBSTEPS:
            raise TooStiff(
                f"value matching too stiff: γκ max(A)‖X W_Vᵀ‖² dt = {gain * h:.3g} needs "
                f"{n_sub} sub-steps (max {MAX_SUBSTEPS}); lower dt, γ or κ")
        return n_sub

    def step(self, st, carry, h):
        n_sub = self.substeps(st, h)
        if n_sub == 1:
            X1, P1, Z1, A1, S1, carry1, X1M, dissipated = self.verlet(st, carry, h, ())
        else:
            dissipated, sub, sub_carry = 0.0, st, carry
            for _ in range(n_sub):
                busy = (st.S, st.Z, st.A, sub.S, sub.Z, sub.A)
                X1, P1, Z1, A1, S1, sub_carry, X1M, d = self.verlet(sub, sub_carry, h / n_sub,
                                                                    busy)
                dissipated += d
                sub = State(t=sub.t, X=X1, P=P1, Z=Z1, A=A1, S=S1)
            carry1 = sub_carry
        new = State(t=st.t + h, X=X1, P=P1, Z=Z1, A=A1, S=S1, S_dot=st.S_dot, B=st.B,
                    dissipated=st.dissipated + dissipated, work=st.work)
        return self.track(st, carry, new, carry1, X1M, h)

    def track(self, st, carry, new, new_carry, X1M, h):
        """Hook for the tracking bound (see :class:`TrackedEtdVerlet`)."""
        return new, new_carry

    def verlet(self, st, carry, h, busy):
        """One step without sub-steps. Returns ``X₁, P₁, Z₁, A₁, S₁``, the new carry,
        ``X₁M`` and the energy dissipated."""
        prob, work = self.problem, self.work
        c = self.constants(h)
        beta, lam, tau, coef = c.beta, c.lam, 0.5 * h, c.logit
        shape = st.Z.shape
        vm = prob.attention_feedback
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
            S_hat0 = np.matmul(G0, st.X.T, out=work.get("vm.S0", shape))
            A_pred = logit_step(st.Z, S_hat0, S_hat0, beta, lam, h, out=work.get("vm.A", shape),
                                coef=coef)
            A_pred = en.rowsoftmax(A_pred, centred=True, out=A_pred)
            R_pred = X1 - A_pred @ (X1 @ prob.W_V.T)
            S_hat1 = np.matmul(X1M + prob.kappa * (R_pred @ prob.W_V), X1.T,
                               out=work.get("vm.S1", shape))
        else:
            S_hat0, S_hat1 = st.S, S1
        Z1 = logit_step(st.Z, S_hat0, S_hat1, beta, lam, h, coef=coef, out=owned("etd.Z"))
        A1 = en.rowsoftmax(Z1, centred=True, out=owned("etd.A"))
        rate = lam / beta
        force1, G1 = prob.force(X1, A1, X1M, X1Mt)

        def rate_at(A, Z, S, D=None):
            return D if D is not None else logit_dissipation_rate(A, Z, S, beta, lam, work)

        if lam * h <= STIFF_LAMBDA_H:  # resolved relaxation: plain trapezoidal kicks
            P1 = P_half + tau * force1
            D1 = rate_at(A1, Z1, S_hat1)
            dissipated = 0.5 * h * (rate_at(st.A, st.Z, S_hat0, carry.D) + D1)
            return (X1, P1, Z1, A1, S1, VerletCarry(force1, G1, None if vm else D1), X1M,
                    dissipated)
        # The transient: a relaxation towards the lagged target βŜ₀ − β(dŜ/dt)/λ with
        # scores frozen; its exact mean minus its own composite trapezoid corrects the
        # trapezoid of the real path (zero when attention already tracks its target).
        # W₀ = Z − βŜ₀ − L with the lag L = ℓ (Ŝ₁ − Ŝ₀), ℓ = −β/(λh)
        W0 = np.multiply(S_hat0, c.lag - beta, out=work.get("etd.W0", shape))
        W0 += st.Z
        axpy(-c.lag, S_hat1, W0)
        D0 = rate_at(st.A, st.Z, S_hat0, carry.D)
        D1 = rate_at(A1, Z1, S_hat1)
        carry1 = VerletCarry(force1, G1, None if vm else D1)
        if tracks(W0, work.get("etd.dev", shape)):
            # attention already tracks its lagged target: the trapezoid is second order
            P1 = P_half + tau * force1
            return X1, P1, Z1, A1, S1, carry1, X1M, 0.5 * h * (D0 + D1)
        lag = np.subtract(S_hat1, S_hat0, out=work.get("etd.lag", shape))
        lag *= c.lag
        target = np.multiply(S_hat0, beta, out=work.get("etd.target", shape))
        target += lag
        _, A_fe, mean_A, _, D_fe, mean_D = relaxation_averages(
            st.Z, S_hat0, beta, lam, h, st.A, lag, W0=W0, D0=D0, work=work,
            out=(work.get("etd.Zfe", shape), work.get("etd.Afe", shape)))
        S_hat_half = 0.5 * (S_hat0 + S_hat1)
        Z_half = logit_step(st.Z, S_hat0, S_hat_half, beta, lam, tau)
        A_half = en.rowsoftmax(Z_half, centred=True)
        E_half = math.exp(-lam * tau)
        A_fm = en.rowsoftmax(target + E_half * W0)
        D_fm = rate * en.row_variance(A_fm, lag + E_half * W0)
        correction = mean_A - 0.25 * (st.A + 2.0 * A_fm + A_fe)
        # kicks weight A_n and A_1 by h/2 each; the rest of the step's mean goes here
        K = A_half - 0.5 * (st.A + A1) + 2.0 * correction
        P1 = (P_half + tau * force1
              + tau * (prob.force(st.X, st.A + K)[0] - force0))
        D_half = rate_at(A_half, Z_half, S_hat_half)
        dissipated = h * (0.25 * (D0 + 2.0 * D_half + D1)
                          + mean_D - 0.25 * (D0 + 2.0 * D_fm + D_fe))
        return X1, P1, Z1, A1, S1, carry1, X1M, dissipated


class TrackedEtdVerlet(EtdVerlet):
    """:class:`EtdVerlet` that also keeps the tracking bound ``B`` (canonical model).

    ``dS/dt`` and ``B`` are diagnostics the next step does not need: they wait in the
    carry and are computed for up to :meth:`batch` steps at once by :meth:`finish` — one
    batched product for ``dS/dt`` and ``B_j = e^{−λh} B_{j−1} + g_j`` with
    ``g_j = w₁ osc Ṡ_j + w₀ osc Ṡ_{j−1}``: every step gets the values a step-by-step update
    gives, whatever the chunking.
    """

    def track(self, st, carry, new, new_carry, X1M, h):
        pending = carry.pending
        if pending is None:
            pending = Pending(self.constants(h), st, carry, (), ())
        new = replace(new, S_dot=None, B=None)
        pending = replace(pending, states=pending.states + (new,), XMs=pending.XMs + (X1M,))
        return new, replace(new_carry, pending=pending)

    def batch(self, n_tokens: int) -> int:
        """Steps whose ``dS/dt`` may wait (the batch of N×N matrices stays small)."""
        return max(1, min(64, (1 << 16) // (n_tokens * n_tokens)))

    def finish(self, state, carry):
        pending = carry.pending
        if pending is None:
            return state, carry
        c, base, states, XMs = pending.constants, pending.base, pending.states, pending.XMs
        M, mass = self.problem.M, self.problem.mass
        osc0 = pending.base_carry.osc_S_dot
        osc0 = en.oscillation(base.S_dot) if osc0 is None else osc0
        try:
            Xs = np.stack([s.X for s in states])
            Vs = np.stack([s.P for s in states])
            if mass != 1.0:  # P/m is P itself when m = 1 (the division is exact)
                Vs = Vs / mass
            S_dots = np.concatenate((Vs @ M, np.stack(XMs)), axis=2) @ np.concatenate(
                (Xs, Vs), axis=2).transpose(0, 2, 1)
            oscs = en.oscillation(S_dots)
            g = np.multiply(oscs, c.w1)  # w₁ osc Ṡ_j + w₀ osc Ṡ_{j−1}
            g[0] += c.w0 * osc0
            if len(states) > 1:
                g[1:] += c.w0 * oscs[:-1]
        except FloatingPointError:
            return self._finish_stepwise(c, base, pending.base_carry, osc0, states, XMs)
        B, decay = base.B, c.decay
        for j in range(len(states)):  # the same operations whatever the chunking
            B = decay * B
            B += g[j]
        state = replace(state, S_dot=S_dots[-1].copy(), B=B)
        return state, replace(carry, pending=None, osc_S_dot=oscs[-1].copy())

    def _finish_stepwise(self, c, base, base_carry, osc0, states, XMs):
        """:meth:`finish` one step at a time, to find the step whose ``dS/dt`` overflows;
        raises :class:`DeferredOverflow` with the state before it."""
        from ..models.part_one import score_rate

        M, mass, prev, prev_carry = self.problem.M, self.problem.mass, base, base_carry
        for new, XM in zip(states, XMs, strict=True):
            try:
                S1_dot = score_rate(new.X, new.P / mass, M, XM)
                osc1 = en.oscillation(S1_dot)
            except FloatingPointError as err:
                raise DeferredOverflow(str(err), new.t, prev, prev_carry) from None
            g = np.multiply(osc1, c.w1)
            g += c.w0 * osc0
            B = c.decay * prev.B
            B += g
            osc0 = osc1
            prev = replace(new, S_dot=S1_dot, B=B)
            prev_carry = VerletCarry(osc_S_dot=osc1)
        raise AssertionError("finish failed without an overflowing step")  # pragma: no cover
