"""The engine of :func:`~dynamics.batch.simulate_batch` for runs on the canonical model's
plain branch: :class:`CanonicalBatch` (its stiff twin: :class:`~dynamics.batch_stiff.StiffBatch`).
"""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .batch_diagnostics import stacked_balance, stacked_frames
from .divergence import LAW_TOLERANCE
from .logits import AXPY_MIN_SIZE, exp_trapezoid, logit_coefficients
from .settings import Settings
from .simulation import Simulation
from .state import State
from .steppers.tracked_verlet import TrackedEtdVerlet
from .steppers.verlet_carry import VerletCarry
from .trajectory import Trajectory


class CanonicalBatch:
    """Runs of the canonical model stepped together (see the module docstring): the
    plain branch of :meth:`~dynamics.steppers.etd_verlet.EtdVerlet.verlet` and the
    tracking bound of :meth:`~dynamics.steppers.tracked_verlet.TrackedEtdVerlet.finish`,
    operation for operation, on stacks whose rows are the runs still running
    (:attr:`rows`, their indices in the list)."""

    #: Per-run constants and state, stacked along the first axis (compacted together).
    STACKS = ("E", "c0", "b", "w0", "w1", "decay", "drift", "beta",
              "mass_col", "mass", "confinement", "M", "MMt", "norm_limit",
              "X", "P", "Z", "A", "S", "S_dot", "Bound", "dissipated", "work", "osc")

    def __init__(self, settings: list[Settings]):
        self.settings = settings
        self.sims = [Simulation(s) for s in settings]
        if any(not isinstance(sim.stepper, TrackedEtdVerlet) for sim in self.sims):
            raise ValueError("CanonicalBatch steps runs of the canonical model only")
        probs = [sim.problem for sim in self.sims]
        if any(p.fixed for p in probs):
            raise ValueError("CanonicalBatch does not pin fixed feature coordinates: a real "
                             "head (weights='minilm') runs alone")
        states = [sim.state for sim in self.sims]
        self.h = h = settings[0].dt

        def col(values):  # per-run floats, as a single run computes them, broadcasting
            return np.array(values, dtype=float)[:, None, None]

        coefs = [logit_coefficients(p.beta, p.relaxation_rate, h) for p in probs]
        trap = [exp_trapezoid(p.relaxation_rate, h) for p in probs]
        self.E, self.c0, self.b = (col([c[k] for c in coefs]) for k in range(3))
        self.w0 = np.array([p.beta * w[0] for p, w in zip(probs, trap, strict=True)])[:, None]
        self.w1 = np.array([p.beta * w[1] for p, w in zip(probs, trap, strict=True)])[:, None]
        self.decay = np.array([math.exp(-p.relaxation_rate * h) for p in probs])[:, None]
        self.drift = col([h / p.mass for p in probs])  # h/m
        self.beta = np.array([p.beta for p in probs])
        self.mass = np.array([p.mass for p in probs])
        self.mass_col = col([p.mass for p in probs])  # P/m is divided, as a run divides
        self.confinement = np.array([p.confinement for p in probs])
        self.M = np.stack([p.M for p in probs])
        self.MMt = np.stack([np.concatenate((p.M, p.M.T), axis=1) for p in probs])
        self.norm_limit = np.array([s.norm_limit for s in settings])
        self.t = states[0].t
        for name, field in (("X", "X"), ("P", "P"), ("Z", "Z"), ("A", "A"), ("S", "S"),
                            ("S_dot", "S_dot"), ("Bound", "B")):
            setattr(self, name, np.stack([getattr(st, field) for st in states]))
        self.dissipated = np.array([st.dissipated for st in states])
        self.work = np.array([st.work for st in states])
        self.osc = en.oscillation(self.S_dot)
        self.force = self.neg_entropy = None  # the first step computes them as a run does
        self.rows = np.arange(len(self.sims))
        self._held = {}  # run -> its state where the law last held (see watch)
        self._flags()

    def _keep(self, keep):
        """Only the rows ``keep`` (a boolean mask) go on."""
        for name in self.STACKS + (("force", "neg_entropy") if self.force is not None else ()):
            setattr(self, name, getattr(self, name)[keep])
        self.rows = self.rows[keep]
        self._flags()

    def _flags(self):
        """What the stacked operations check once per batch, not once per step."""
        self.any_mass = bool(np.any(self.mass != 1.0))
        self.all_confined = bool(np.all(self.confinement != 0.0))
        self.any_confined = bool(np.any(self.confinement != 0.0))

    # -- stacked operations, each as the single-run code performs it --------------------
    def _force(self, X, A, XM, XMt, rows=None):
        """``CanonicalProblem.force``: ``Aᵀ(X M) + A(X Mᵀ) − kX`` (no ``− kX`` where
        ``k = 0``, as a run skips it); of the rows ``rows`` only (indices), if given."""
        force = A.transpose(0, 2, 1) @ XM
        force += A @ XMt
        k = self.confinement if rows is None else self.confinement[rows]
        if self.all_confined:
            force -= k[:, None, None] * X
        elif self.any_confined:
            nz = k != 0.0
            force[nz] -= k[nz, None, None] * X[nz]
        return force

    def _vdot(self, x, y):
        """``float(np.vdot(x, y))`` per run (the flattened rows' dot, as BLAS takes it)."""
        n = len(x)
        return np.vecdot(x.reshape(n, -1), y.reshape(n, -1))

    def _neg_entropy(self, A, Z):
        """``transient.neg_entropy``: ``Σ A log A`` per run, ``⟨A, Z⟩ + Σ_i log max_j A_ij``
        (row maxima of ``Z`` 0)."""
        return self._vdot(A, Z) + np.log(en.max_reduce(A, -1)).sum(axis=-1)

    @staticmethod
    def _axpy(a, x, y):
        """``logits.axpy``: ``y += a x`` (BLAS axpy from the size where a run uses it)."""
        if x.shape[-1] * x.shape[-2] < AXPY_MIN_SIZE:
            y += a * x
        else:
            from scipy.linalg.blas import daxpy

            for k in range(y.shape[0]):
                if a[k, 0, 0] != 0.0:
                    daxpy(x[k].reshape(-1), y[k].reshape(-1), a=a[k, 0, 0])
        return y

    def step(self):
        """One step of every row (``EtdVerlet.verlet``, plain branch, then the bound of
        ``TrackedEtdVerlet.finish``). Raises ``FloatingPointError`` where a run would
        stop (and changes nothing then)."""
        h, tau = self.h, 0.5 * self.h
        X0, P0, Z0, A0, S0 = self.X, self.P, self.Z, self.A, self.S
        d = X0.shape[-1]
        if self.force is None:  # the first step: CanonicalProblem.force(X, A)
            force0 = self._force(X0, A0, X0 @ self.M, X0 @ self.M.transpose(0, 2, 1))
            n0 = self._neg_entropy(A0, Z0)
        else:
            force0, n0 = self.force, self.neg_entropy
        P_half = P0 + tau * force0
        X1 = X0 + self.drift * P_half
        X1MMt = X1 @ self.MMt
        X1M, X1Mt = X1MMt[..., :d], X1MMt[..., d:]
        S1 = np.matmul(X1M, X1.transpose(0, 2, 1))
        Z1 = np.multiply(Z0, self.E)
        self._axpy(self.c0, S0, Z1)
        self._axpy(self.b, S1, Z1)
        np.subtract(Z1, en.max_reduce(Z1, -1, keepdims=True), out=Z1)
        A1 = np.exp(Z1)
        A1 *= np.divide(1.0, en.sum_reduce(A1, -1))[..., None]
        force1 = self._force(X1, A1, X1M, X1Mt)
        n1 = self._neg_entropy(A1, Z1)
        P1 = P_half + tau * force1
        # ∫D from the free-energy balance at the trapezoidal mean of attention
        # (``transient.trapezoid_path_dissipation``, as a run's step below the stiff branch)
        vdot = self._vdot
        balance = 0.5 * (vdot(A1, S0) + vdot(A1, S1) - vdot(A0, S0) - vdot(A0, S1))
        balance -= (n1 - n0) / self.beta
        dissipated = self.dissipated + balance
        # the tracking bound (TrackedEtdVerlet.finish on plain steps): dS/dt at the end
        V1 = P1 / self.mass_col if self.any_mass else P1
        S1_dot = np.concatenate((V1 @ self.M, X1M), axis=2) @ np.concatenate(
            (X1, V1), axis=2).transpose(0, 2, 1)
        osc1 = en.oscillation(S1_dot)
        g = np.multiply(osc1, self.w1)
        g += self.w0 * self.osc
        Bound = self.decay * self.Bound
        Bound += g
        n = len(X1)
        flat = X1.reshape(n, -1)
        norm = np.sqrt(np.vecdot(flat, flat))
        # where some run would stop (a norm over its limit or not finite, a non-finite
        # energy), the engine takes the step run by run (:meth:`step_alone`)
        over = np.subtract(norm, self.norm_limit)
        over += 0.0 * dissipated
        over += 0.0 * self.work
        if not en.max_reduce(over) <= 0.0:
            raise FloatingPointError("a run stops at this step")
        self.X, self.P, self.Z, self.A, self.S = X1, P1, Z1, A1, S1
        self.S_dot, self.Bound, self.osc = S1_dot, Bound, osc1
        self.force, self.neg_entropy, self.dissipated = force1, n1, dissipated
        self.t = self.t + h

    # -- one run at a time, where a step fails for some run ----------------------------
    def _state_of(self, k):
        """The state of row ``k``."""
        return State(t=self.t, X=self.X[k].copy(), P=self.P[k].copy(), Z=self.Z[k].copy(),
                     A=self.A[k].copy(), S=self.S[k].copy(), S_dot=self.S_dot[k].copy(),
                     B=self.Bound[k].copy(), dissipated=float(self.dissipated[k]),
                     work=float(self.work[k]))

    def step_alone(self):
        """This step row by row through each run's own engine; runs that stop leave."""
        if self.force is None:
            self.force, self.neg_entropy = np.empty_like(self.X), np.empty(len(self.X))
            first = True
        else:
            first = False
        keep = np.ones(len(self.rows), dtype=bool)
        for k, i in enumerate(self.rows):
            sim = self.sims[i]
            sim._state = self._state_of(k)
            sim._carry = VerletCarry(force=None if first else self.force[k].copy(),
                                     neg_entropy=None if first else float(
                                         self.neg_entropy[k]), continued=not first,
                                     osc_S_dot=self.osc[k].copy())
            law, sim.law = sim.law, None  # the law is watched where a run watches it
            sim.advance(1)
            sim.law = law
            st, carry = sim._state, sim._carry
            self.X[k], self.P[k], self.Z[k], self.A[k], self.S[k] = st.X, st.P, st.Z, st.A, st.S
            self.S_dot[k], self.Bound[k] = st.S_dot, st.B
            self.dissipated[k], self.work[k] = st.dissipated, st.work
            if sim.status == "running":
                self.force[k], self.osc[k] = carry.force, carry.osc_S_dot
                self.neg_entropy[k] = carry.neg_entropy
            else:
                keep[k] = False
        self.t = self.t + self.h
        if not keep.all():
            self._keep(keep)

    def watch(self):
        """Each run's energy law, checked where its own engine checks it (every
        :meth:`~dynamics.steppers.base.Stepper.batch` steps and at each frame,
        :class:`~dynamics.divergence.LawWatch`); runs that broke it leave.

        The law's terms come from the stacks (:func:`stacked_balance`), its test is
        :meth:`LawWatch.check`'s; the state where it last held is kept for every row as a
        copy of the stacks (a run's watch copies its state). A row that broke it is handed
        to its run's own watch, from the state it last held: the run stops there, with its
        message."""
        sims = [self.sims[i] for i in self.rows]
        if any(sim.law is None for sim in sims):
            return self._watch_alone()
        residual, kinetic = stacked_balance(self)
        keep = np.ones(len(self.rows), dtype=bool)
        for k, sim in enumerate(sims):
            law = sim.law
            if self.t == law.held.t:
                continue
            with np.errstate(all="ignore"):
                dissipated, work = float(self.dissipated[k]), float(self.work[k])
                exchanged = abs(float(kinetic[k]) - law.momentum0)
                scale = max(law.scale, abs(float(residual[k]) + work - dissipated),
                            abs(dissipated), abs(work),
                            exchanged if math.isfinite(exchanged) else 0.0)
            if abs(float(residual[k])) <= LAW_TOLERANCE * scale:
                law.scale = scale
                continue
            held = self._held.get(int(self.rows[k]))
            if held is not None:  # the state it last held, a State again for its watch
                law.held = held()
            sim._state, sim._carry = self._state_of(k), VerletCarry()
            sim._watch()
            keep[k] = sim.status == "running"
        t, stacks = self.t, {name: getattr(self, name).copy() for name in self.HELD}
        self._held = {int(i): (lambda k=k: self._held_state(t, stacks, k))
                      for k, i in enumerate(self.rows)}
        if not keep.all():
            self._keep(keep)

    #: The stacks a row's held state is made of.
    HELD = ("X", "P", "Z", "A", "S", "S_dot", "Bound", "dissipated", "work")

    @staticmethod
    def _held_state(t, stacks, k):
        return State(t=t, X=stacks["X"][k], P=stacks["P"][k], Z=stacks["Z"][k],
                     A=stacks["A"][k], S=stacks["S"][k], S_dot=stacks["S_dot"][k],
                     B=stacks["Bound"][k], dissipated=float(stacks["dissipated"][k]),
                     work=float(stacks["work"][k]))

    def _watch_alone(self):
        """:meth:`watch` through each run's own watch."""
        keep = np.ones(len(self.rows), dtype=bool)
        for k, i in enumerate(self.rows):
            sim = self.sims[i]
            sim._state, sim._carry = self._state_of(k), VerletCarry()
            sim._watch()
            keep[k] = sim.status == "running"
        if not keep.all():
            self._keep(keep)

    def _frame(self, i, k, names):
        """The frame run ``i`` (row ``k`` while it runs) reports now (the diagnostics
        ``names``, None for all)."""
        sim = self.sims[i]
        if k is not None:
            sim._state, sim._carry = self._state_of(k), VerletCarry()
        return sim.frame(names, arrays=False)

    def run(self, t_end: float, every: int, names=None) -> list[Trajectory]:
        """Step to ``t_end`` (``round(t_end/dt)`` steps), a frame every ``every`` steps,
        with the diagnostics ``names`` (None: all)."""
        n_steps = max(1, int(round(t_end / self.h)))
        frames = [[sim.frame(names, arrays=False)] for sim in self.sims]
        done, watch = 0, self.sims[0].stepper.batch(self.X.shape[1])
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            while done < n_steps and len(self.rows):
                chunk = min(every, n_steps - done)
                recorded = list(self.rows)
                for j in range(chunk):
                    if not len(self.rows):
                        break
                    try:
                        self.step()
                    except FloatingPointError:
                        self.step_alone()
                    if (j + 1) % watch == 0 or j + 1 == chunk:
                        self.watch()
                done += chunk
                row = {int(i): k for k, i in enumerate(self.rows)}
                stacked = stacked_frames(self, names)  # (None: each run reports alone)
                for i in recorded:
                    k = row.get(int(i))
                    frames[i].append(self._frame(i, k, names) if stacked is None or k is None
                                     else stacked(k))
        return [Trajectory.from_frames(s, f, sim)
                for s, f, sim in zip(self.settings, frames, self.sims, strict=True)]


__all__ = ["CanonicalBatch"]
