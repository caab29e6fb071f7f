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

Here every row's step is computed on the stacks (:func:`~dynamics.batch_stiff_step.
stiff_verlet`), operation for operation as a run computes it (per-run scalars as arrays
of the floats a run computes; ``np.matmul`` on stacks, row reductions over the last axis,
sums over a matrix as ``np.vecdot`` of its flattened rows): the tracking rows' correction,
the transient's mean for the others (rows grouped by their panels in ``u``). The rows
whose step is graded take their sub-steps together, each row its own sequence of sizes
(``0.25/λ`` doubling up to ``h/32`` on a start, ``h/8`` in its chain: rows with fewer
sub-steps leave the sub-batch when theirs are done), as their runs would. The tracking
bound ``B`` follows
:meth:`~dynamics.steppers.tracked_verlet.TrackedEtdVerlet.finish` (the quadratic rule from
the second step on). ``tests/test_batch_stiff.py`` checks each run against ``simulate``.
"""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .batch_canonical import CanonicalBatch
from .batch_stiff_step import step_constants, stiff_verlet
from .state import State
from .steppers.grading import (
    CHAIN_SUBSTEPS,
    GRADED_DECAY,
    GRADED_FIRST,
    GRADED_MIN_LAMBDA_H,
    GRADED_OSC,
    GRADED_SUBSTEPS,
    substeps,
)
from .steppers.verlet_carry import VerletCarry


class StiffBatch(CanonicalBatch):
    """Stiff runs of the canonical model stepped together (see the module docstring)."""

    #: Per-run constants and state, stacked along the first axis (compacted together).
    STACKS = CanonicalBatch.STACKS + ("chain_decay", "graders", "D", "graded", "before")

    def __init__(self, settings):
        super().__init__(settings)
        probs = [sim.problem for sim in self.sims]
        self.c = step_constants(probs, [self.h] * len(probs))
        lam_h = self.c.lam_h
        self.chain_decay = np.array([math.exp(-GRADED_DECAY * float(v)) for v in lam_h])
        self.graders = lam_h >= GRADED_MIN_LAMBDA_H
        n = len(probs)
        self.D, self.graded = np.zeros(n), np.zeros(n)
        self.before = np.zeros_like(self.osc)
        self.first = True  # no step taken: no D, no osc dS/dt one step before
        self.alone_steps = 0  # steps taken by a run's own engine (reported)
        self.graded_steps = 0  # graded steps taken on the stacks (reported)

    def _keep(self, keep):
        super()._keep(keep)
        for name, value in vars(self.c).items():
            setattr(self.c, name, value[keep])

    def step(self):
        """One step of every row (:func:`~dynamics.batch_stiff_step.stiff_verlet`; graded
        rows in sub-steps, :meth:`_graded`), then the bound of
        ``TrackedEtdVerlet.finish``. Raises ``FloatingPointError`` where a run would stop
        (and changes nothing then)."""
        X0, A0 = self.X, self.A
        if self.force is None:  # the first step: CanonicalProblem.force(X, A)
            force0 = self._force(X0, A0, X0 @ self.M, X0 @ self.M.transpose(0, 2, 1))
        else:
            force0 = self.force
        def decaying(osc_W0):  # after a graded step its chain goes on while it decays
            return (self.graded > 0.0) & ((osc_W0 > GRADED_OSC)
                                          | (osc_W0 < self.graded * self.chain_decay))

        new = stiff_verlet(self, self.c, None, X0, self.P, self.Z, A0, self.S, force0,
                           None if self.first else self.D, decaying)
        osc_W0 = new["osc_W0"]
        graded = self.graders & (decaying(osc_W0) | (new["transient"] & self.first
                                                     & (osc_W0 > GRADED_OSC)))
        new["graded"] = np.where(graded, osc_W0, 0.0)
        rows = np.flatnonzero(graded)
        if len(rows):
            self._graded(rows, force0, new)
        new["dissipated"] = self.dissipated + new["dissipated"]
        # the tracking bound (TrackedEtdVerlet.finish): dS/dt at the end, its increment
        X1, P1, c = new["X"], new["P"], self.c
        V1 = P1 / self.mass_col if self.any_mass else P1
        S1_dot = np.concatenate((V1 @ self.M, new.pop("XM")), axis=2) @ np.concatenate(
            (X1, V1), axis=2).transpose(0, 2, 1)
        osc1 = en.oscillation(S1_dot)
        if self.first:
            g = np.multiply(osc1, self.w1)
            g += self.w0 * self.osc
        else:
            g = np.multiply(osc1, c.wq2)
            g += c.wq1 * self.osc
            g += c.wq0 * self.before
        Bound = self.decay * self.Bound
        Bound += g
        n = len(X1)
        flat = X1.reshape(n, -1)
        over = np.subtract(np.sqrt(np.vecdot(flat, flat)), self.norm_limit)
        over += 0.0 * new["dissipated"]
        if not en.max_reduce(over) <= 0.0:
            raise FloatingPointError("a run stops at this step")
        for name in ("osc_W0", "transient"):
            del new[name]
        new.update(S_dot=S1_dot, Bound=Bound, osc=osc1)
        self.before, self.first = self.osc, False
        for name, value in new.items():
            setattr(self, name, value)
        if self.neg_entropy is None:
            self.neg_entropy = np.zeros(n)  # (the plain step's carry; unused here)
        self.t = self.t + self.h

    def _graded(self, rows, force0, new):
        """The graded step of the rows ``rows`` (``EtdVerlet.graded``): sub-steps of each
        row's own sizes, taken together while rows have some left, into ``new``."""
        h = self.h
        cap = h / (GRADED_SUBSTEPS if self.first else CHAIN_SUBSTEPS)
        sizes = [list(substeps(h, GRADED_FIRST / self.sims[i].problem.relaxation_rate, cap))
                 for i in self.rows[rows]]
        state = {"X": self.X[rows], "P": self.P[rows], "Z": self.Z[rows], "A": self.A[rows],
                 "S": self.S[rows], "force": force0[rows], "XM": None,
                 "D": None if self.first else self.D[rows]}
        dissipated = np.zeros(len(rows))
        for j in range(max(map(len, sizes))):
            on = np.array([k for k, s in enumerate(sizes) if len(s) > j])
            at = rows[on]
            c = step_constants([self.sims[i].problem for i in self.rows[at]],
                               [sizes[k][j] for k in on])
            D0 = None if state["D"] is None else state["D"][on]
            sub = stiff_verlet(self, c, at, state["X"][on], state["P"][on], state["Z"][on],
                               state["A"][on], state["S"][on], state["force"][on], D0,
                               lambda osc: np.zeros(len(osc), dtype=bool))
            if state["XM"] is None:
                state["XM"] = np.empty_like(sub["XM"])
                state["D"] = np.empty(len(rows))
            for name in ("X", "P", "Z", "A", "S", "force", "XM", "D"):
                state[name][on] = sub[name]
            dissipated[on] += sub["dissipated"]
        for name in ("X", "P", "Z", "A", "S", "force", "XM", "D"):
            new[name][rows] = state[name]
        new["dissipated"][rows] = dissipated
        self.graded_steps += len(rows)

    # -- one run at a time, where a step fails for some run ----------------------------
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
