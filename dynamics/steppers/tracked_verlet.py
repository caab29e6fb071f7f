"""The canonical model's stepper: :class:`~.etd_verlet.EtdVerlet` that also keeps the
tracking bound ``B`` (``osc(dS/dt)`` integrated against ``e^{−λ(t−s)}``), computed for
several steps at once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import energy as en
from ..logits import score_rate
from .base import DeferredOverflow
from .etd_verlet import EtdVerlet
from .verlet_carry import Pending, VerletCarry


class TrackedEtdVerlet(EtdVerlet):
    """:class:`EtdVerlet` that also keeps the tracking bound ``B`` (canonical model).

    ``dS/dt`` and ``B`` are diagnostics the next step does not need: they wait in the
    carry and are computed for up to :meth:`batch` steps at once by :meth:`finish` — one
    batched product for ``dS/dt`` and ``B_j = e^{−λh} B_{j−1} + g_j`` with
    ``g_j = w₁ osc Ṡ_j + w₀ osc Ṡ_{j−1}`` (on a stiff step with ``osc Ṡ_{j−2}`` known, the
    quadratic rule ``w₁ osc Ṡ_j + w₀ osc Ṡ_{j−1} + w₋₁ osc Ṡ_{j−2}``): every step gets the
    values a step-by-step update gives, whatever the chunking.
    """

    def track(self, st, carry, new, new_carry, X1M, h):
        pending = carry.pending
        if pending is None:
            pending = Pending(self.constants(h), st, carry, (), ())
        new = replace(new, S_dot=None, B=None)
        pending = replace(pending, states=pending.states + (new,), XMs=pending.XMs + (X1M,))
        return new, replace(new_carry, pending=pending)

    def perturbed(self, state, carry, spread):
        """Noisy logits (rule 8): as :meth:`EtdVerlet.perturbed`; the waiting step gets
        the noisy state and its bound will grow by ``spread``."""
        state, carry = super().perturbed(state, carry, spread)
        pending = carry.pending
        n = len(pending.states)
        spreads = pending.spreads + (None,) * (n - 1 - len(pending.spreads)) + (spread,)
        pending = replace(pending, states=pending.states[:-1] + (state,), spreads=spreads)
        return state, replace(carry, pending=pending)

    def batch(self, n_tokens: int) -> int:
        """Steps whose ``dS/dt`` may wait (the batch of N×N matrices stays small)."""
        return max(1, min(64, (1 << 16) // (n_tokens * n_tokens)))

    @staticmethod
    def _increment(c, osc1, osc0, before):
        """``g`` of one step from ``osc Ṡ`` at its end, its start and (or None) one step
        before."""
        if c.wq is not None and before is not None:
            g = np.multiply(osc1, c.wq[2])
            g += c.wq[1] * osc0
            g += c.wq[0] * before
            return g
        g = np.multiply(osc1, c.w1)
        g += c.w0 * osc0
        return g

    @staticmethod
    def _before(c, base_carry):
        """``osc Ṡ`` one step before the base state, when known for this step size."""
        before = base_carry.osc_before
        return before[1] if before is not None and before[0] == c.h else None

    def finish(self, state, carry):
        pending = carry.pending
        if pending is None:
            return state, carry
        c, base, states, XMs = pending.constants, pending.base, pending.states, pending.XMs
        M, mass = self.problem.M, self.problem.mass
        osc0 = pending.base_carry.osc_S_dot
        osc0 = en.oscillation(base.S_dot) if osc0 is None else osc0
        before = self._before(c, pending.base_carry)
        try:
            Xs = np.stack([s.X for s in states])
            Vs = np.stack([s.P for s in states])
            if mass != 1.0:  # P/m is P itself when m = 1 (the division is exact)
                Vs = Vs / mass
            S_dots = np.concatenate((Vs @ M, np.stack(XMs)), axis=2) @ np.concatenate(
                (Xs, Vs), axis=2).transpose(0, 2, 1)
            oscs = en.oscillation(S_dots)
            if c.wq is None:  # w₁ osc Ṡ_j + w₀ osc Ṡ_{j−1}, batched
                g = np.multiply(oscs, c.w1)
                g[0] += c.w0 * osc0
                if len(states) > 1:
                    g[1:] += c.w0 * oscs[:-1]
            else:
                chain = [before, osc0, *oscs]  # osc Ṡ at steps j − 2, j − 1, j: chain[j:j+3]
                g = [self._increment(c, chain[j + 2], chain[j + 1], chain[j])
                     for j in range(len(states))]
            B, decay, spreads = base.B, c.decay, pending.spreads
            for j in range(len(states)):  # the same operations whatever the chunking
                B = decay * B
                B += g[j]
                if j < len(spreads) and spreads[j] is not None:  # noise on the logits
                    B += spreads[j]
        except FloatingPointError:
            return self._finish_stepwise(c, base, pending.base_carry, osc0, states, XMs,
                                         carry, pending.spreads)
        state = replace(state, S_dot=S_dots[-1].copy(), B=B)
        last = oscs[-2] if len(states) > 1 else osc0
        return state, replace(carry, pending=None, osc_S_dot=oscs[-1].copy(),
                              osc_before=(c.h, last.copy()))

    def _finish_stepwise(self, c, base, base_carry, osc0, states, XMs, states_carry,
                         spreads=()):
        """:meth:`finish` one step at a time, to find the step whose ``dS/dt`` or bound
        overflows; raises :class:`DeferredOverflow` with the state before it (or returns
        the finished state, should every step go through one at a time)."""
        M, mass, prev, prev_carry = self.problem.M, self.problem.mass, base, base_carry
        before = self._before(c, base_carry)
        for j, (new, XM) in enumerate(zip(states, XMs, strict=True)):
            try:
                S1_dot = score_rate(new.X, new.P / mass, M, XM)
                osc1 = en.oscillation(S1_dot)
                B = c.decay * prev.B
                B += self._increment(c, osc1, osc0, before)
                if j < len(spreads) and spreads[j] is not None:
                    B += spreads[j]
            except FloatingPointError as err:
                raise DeferredOverflow(str(err), new.t, prev, prev_carry) from None
            before, osc0 = osc0, osc1
            prev = replace(new, S_dot=S1_dot, B=B)
            prev_carry = VerletCarry(osc_S_dot=osc1, osc_before=(c.h, before))
        return prev, replace(states_carry, pending=None, osc_S_dot=prev_carry.osc_S_dot,
                             osc_before=prev_carry.osc_before)
