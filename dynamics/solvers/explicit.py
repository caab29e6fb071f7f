"""Accuracy on request for a non-stiff canonical run: DOP853 on the whole system.

When the relaxation is slow (``λ = γ/β`` at most :data:`EXPLICIT_RATE`), nothing in the
canonical model is stiff and an explicit embedded Runge–Kutta pair of high order on the
whole system is the right tool: ``simulate(rtol=...)`` then steps with
:class:`scipy.integrate.DOP853` (Dormand–Prince 8(5,3), the error control of
``solve_ivp``) on the logit form of the Theory page's canonical model,

    y = [X, P, Z, ∫D]:   Ẋ = P/m,   Ṗ = A X Mᵀ + Aᵀ X M − kX,   Ż = −λ (Z − βS),
                         d∫D/dt = (λ/β) Σ_i Var_{A_i}(Z_i − βS_i),

with ``A = rowsoftmax(Z)``: the dissipated energy is integrated with the state, so
``dissipated`` and ``H`` of every frame are as accurate as the features.
:func:`canonical_field` is the fused field; the readable one is
``canonical.coupled_reference``, and the tests compare the two.

The tracking bound ``dB/dt = −λB + β osc(dS/dt)`` is not in the system (its kinks made
DOP853 reject one step in two): each step updates it by quadrature
(:func:`~dynamics.solvers.tracking_bound.bound_steps`).

Why a threshold on ``λ``: DOP853's stability interval on the negative real axis ends
near ``−6``, so once ``λh`` would exceed that the relaxation, not the accuracy, limits its
step (its cost then grows like ``λ t_end``); the exact logit step of the other branch
(:mod:`dynamics.solvers.adaptive`) has no such limit, nor has the exponential Runge–Kutta method
that now steps stiff canonical runs (:mod:`dynamics.solvers.exprk`). :data:`EXPLICIT_RATE` is where
DOP853 and the step-doubled exact logit step (the table's "other branch") cost about
the same at ``rtol = 1e-4`` on the benchmark problem (canonical, N = 8, d = 4, β = 1,
t = 2; ms per run, load average ≈ 1.5, error ``max|X − X_ref|`` in brackets):

    γ = λ    DOP853 rtol 1e-4      1e-6        other branch 1e-4     1e-6
    1        4.4  (9e-7)     8.7  (3e-8)       31.5 (1e-7)     134  (2e-10)
    8        12.2 (8e-9)     20.4 (5e-10)      77.2 (2e-6)     234  (8e-10)
    64       20.2 (2e-9)     36.7 (1e-10)      17.1 (3e-5)     122  (7e-8)
    256      76.8 (2e-10)    110  (3e-11)      20.0 (4e-5)     133  (1e-7)
    1000     241  (2e-9)     235  (7e-12)      10.6 (1e-5)     112  (7e-7)

At tighter targets DOP853 stays ahead to larger ``λ`` (about 256 at 1e-6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.integrate import DOP853

from .. import energy as en
from ..logits import centre_rows
from ..models.canonical import CanonicalProblem
from ..state import State
from ..steppers.base import Stepper
from .tracking_bound import bound_steps

#: Largest ``λ = γ/β`` whose canonical runs ``simulate(rtol)`` steps with DOP853.
EXPLICIT_RATE = 64.0
#: Most steps whose diagnostics wait while the caller reports no state.
HELD = 64
#: Bisections locating where ‖X‖ crosses the norm limit inside a step.
BISECTIONS = 40


def explicit_suits(problem) -> str | None:
    """Why :class:`ExplicitStepper` should not run ``problem``, or None when it should: a
    single-head canonical model whose relaxation rate is at most :data:`EXPLICIT_RATE`."""
    if type(problem) is not CanonicalProblem:
        return f"{type(problem).__name__} has no fused field for the explicit branch"
    if problem.relaxation_rate > EXPLICIT_RATE:
        return (f"stiff relaxation: λ = γ/β = {problem.relaxation_rate:g} exceeds "
                f"{EXPLICIT_RATE:g}")
    return None


def canonical_field(prob: CanonicalProblem, n_tokens: int, dim: int):
    """The fused field ``f(t, y)`` of the canonical model, ``y = [X, P, Z, ∫D]`` of
    length ``2Nd + N² + 1`` (see the module docstring)."""
    N, d = n_tokens, dim
    nx, nz = N * d, N * N
    beta, lam, mass, k = prob.beta, prob.relaxation_rate, prob.mass, prob.confinement
    MMt = np.stack((prob.M, prob.M.T))  # X @ MMt = [X M; X Mᵀ], shape (2, N, d)
    fixed = prob.fixed
    size = 2 * nx + nz + 1
    iZ, iD = slice(2 * nx, 2 * nx + nz), 2 * nx + nz

    def field(_t, y):
        X = y[:nx].reshape(N, d)
        Z = y[iZ].reshape(N, N)
        out = np.empty(size)
        if mass == 1.0:
            out[:nx] = y[nx:2 * nx]
        else:
            np.divide(y[nx:2 * nx], mass, out=out[:nx])
        XMs = X @ MMt
        XM, XMs = XMs[0], XMs.reshape(2 * N, d)
        W = np.matmul(XM, X.T)  # S, then W = Z − βS
        if beta == 1.0:
            np.subtract(Z, W, out=W)
        else:
            W *= -beta
            W += Z
        A = np.exp(Z - Z.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        # Ṗ = Aᵀ X M + A X Mᵀ − kX, as one product [Aᵀ | A] [X M; X Mᵀ]
        F = np.matmul(np.concatenate((A.T, A), axis=1), XMs,
                      out=out[nx:2 * nx].reshape(N, d))
        if k:
            F -= k * X
        if fixed:
            F[:, -fixed:] = 0.0
        np.multiply(W, -lam, out=out[iZ].reshape(N, N))
        W -= np.vecdot(A, W)[:, None]  # centred rows: D = (λ/β) Σ A W²
        W *= W
        out[iD] = lam / beta * float(np.vdot(A, W))
        return out

    return field


def first_step(field, t0, y0, span, rtol, atol, order=DOP853.error_estimator_order):
    """The first step of a run: the starting-step algorithm of Hairer, Nørsett & Wanner
    (I, §II.4; ``solve_ivp``'s own) with each component measured against
    ``atol + rtol·max(|y₀|, rms(y₀))`` instead of ``atol + rtol·|y₀|``. ``order``: that
    of the solver's error estimate (DOP853's: 7).

    Momenta start at rest (``P(0) = 0``) and ``∫D`` at 0: measured against ``atol``
    alone, their first rates of change made the step chosen ~0.005 on the benchmark run,
    and DOP853 (growing a step at most tenfold) then spent two of its five steps reaching
    the run's own scale (0.2–0.5)."""
    scale = atol + rtol * np.maximum(np.abs(y0), math.sqrt(float(np.mean(y0 * y0))))

    def rms(v):
        return math.sqrt(float(np.mean((v / scale) ** 2)))

    f0 = field(t0, y0)
    d0, d1 = rms(y0), rms(f0)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    d2 = rms(field(t0 + h0, y0 + h0 * f0) - f0) / h0
    if max(d1, d2) <= 1e-15:
        h1 = max(1e-6, 1e-3 * h0)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    return min(100.0 * h0, h1, span)


@dataclass(frozen=True)
class ExplicitCarry:
    """Which solver step a state came from (the solver continues only from that state),
    and the steps since the last finished state (:meth:`ExplicitStepper.finish`): that
    state's bound and per step its size and ``(X, V, Ẍ)`` at both ends."""

    step: int
    B: np.ndarray
    hs: tuple = ()
    ends: tuple = ()


class ExplicitStepper(Stepper):
    """One accepted DOP853 step per :meth:`step`, on :func:`canonical_field`.

    ``step(state, carry, h)`` continues the solver when ``state`` is the one it returned
    last, else starts it afresh from ``state``; the step ends at most at ``t_end`` (the
    solver chooses its size and its first one, ``h`` is not used). A step whose features
    cross ``norm_limit`` ends where they cross it (bisection of the step's dense
    output), so that the engine stops the run at that time as it would with small steps.

    A step's state holds ``t, X, P, Z`` and ``∫D``; its attention, scores, ``dS/dt`` and
    tracking bound wait in the carry for :meth:`finish` (rule 6), which takes them for
    all waiting steps at once; while ``hold`` is set (the caller reports no state) it
    waits for up to :data:`HELD` steps.
    """

    order = 8
    method = "DOP853"
    #: order of the solver's error estimate (the starting step's exponent, as scipy's)
    estimator_order = DOP853.error_estimator_order
    #: steps with a larger ``λh`` take the exponential trapezoid rule in :func:`bound_steps`
    bound_smooth = math.inf

    def __init__(self, problem, *, rtol: float, atol: float, t_end: float,
                 norm_limit: float = math.inf):
        super().__init__(problem)
        self.rtol, self.atol, self.t_end = rtol, atol, t_end
        self.norm_limit = norm_limit
        self._solver = None
        self._field = None
        self._count = self._nfev_done = 0
        self.accepted = self._attempts_done = self._dense_calls = 0
        self.hold = False

    def start(self, state):
        return ExplicitCarry(-1, state.B)

    def start_solver(self, st):
        """Start the solver afresh from the state ``st`` (the fused field of its shape built
        on the first call), and return it."""
        N, d = st.X.shape
        if self._field is None:
            self._field, self._nx = canonical_field(self.problem, N, d), N * d
        y0 = np.concatenate([st.X.ravel(), st.P.ravel(), st.Z.ravel(), [st.dissipated]])
        self._retire()
        h = first_step(self._field, st.t, y0, self.t_end - st.t, self.rtol, self.atol,
                       order=self.estimator_order)
        self._nfev_done += 2
        self._solver = self._new_solver(st.t, y0, h)
        return self._solver

    def _retire(self):
        """Adds the current solver's field evaluations and attempted steps to the run's
        and drops it."""
        solver = self._solver
        if solver is None:
            return
        self._nfev_done += solver.nfev
        self._attempts_done += self._attempts(solver)
        self._solver, self._dense_calls = None, 0

    def _attempts(self, solver) -> int:
        """Steps ``solver`` has tried: a DOP853 attempt evaluates the field 12 times, its
        start once and a dense output 3 times more (0 for another solver, which counts
        its own)."""
        if not isinstance(solver, DOP853):
            return 0
        return (solver.nfev - 1 - 3 * self._dense_calls) // 12

    def _new_solver(self, t0, y0, h):
        """The solver of a run from ``(t0, y0)``, first step ``h`` (a subclass may change
        it: :class:`~dynamics.solvers.exprk.ExponentialStepper`)."""
        return DOP853(self._field, t0, y0, self.t_end, rtol=self.rtol, atol=self.atol,
                      first_step=h)

    def step(self, st, carry, h):
        solver = self._solver
        if (solver is None or carry is None or carry.step != self._count
                or solver.t != st.t):
            solver = self.start_solver(st)
            carry = ExplicitCarry(self._count, st.B)
        t0, y0, f0 = solver.t, solver.y, solver.f
        message = solver.step()
        if solver.status == "failed":
            raise FloatingPointError(f"{self.method} failed at t = {t0:.6g}: {message}")
        self._count += 1
        self.accepted += 1
        t1, y1, f1 = solver.t, solver.y, solver.f
        nx, nz = self._nx, st.Z.size
        if math.sqrt(float(np.vdot(y1[:nx], y1[:nx]))) > self.norm_limit:
            t1, y1 = self._crossing(t0)
            f1 = self._field(t1, y1)
            self._nfev_done += 1
        N, d = st.X.shape
        new = State(t=t1, X=y1[:nx].reshape(N, d), P=y1[nx:2 * nx].reshape(N, d),
                    Z=centre_rows(y1[2 * nx:2 * nx + nz].reshape(N, N)),
                    dissipated=float(y1[2 * nx + nz]), work=st.work, noise_work=st.noise_work)
        ends = np.stack((y0[:nx], f0[:nx], f0[nx:2 * nx], y1[:nx], f1[:nx], f1[nx:2 * nx]))
        return new, ExplicitCarry(self._count, carry.B, carry.hs + (t1 - t0,),
                                  carry.ends + (ends,))

    def finish(self, state, carry):
        """Attention, scores, ``dS/dt`` and the tracking bound of ``state`` (rule 6)."""
        if carry is None or not carry.hs or (self.hold and len(carry.hs) < HELD):
            return state, carry
        prob = self.problem
        N, d = state.X.shape
        ends = np.stack(carry.ends).reshape(-1, 2, 3, N, d)
        ends[:, :, 2] /= prob.mass  # Ṗ/m
        B = bound_steps(prob, carry.B, np.array(carry.hs), ends[:, 0], ends[:, 1],
                        self.bound_smooth)
        X, V = state.X, state.P / prob.mass
        XM = X @ prob.M
        S_dot = np.concatenate((V @ prob.M, XM), axis=1) @ np.concatenate((X, V), axis=1).T
        state = replace(state, A=en.rowsoftmax(state.Z, centred=True), S=XM @ X.T,
                        S_dot=S_dot, B=B)
        return state, ExplicitCarry(carry.step, B)

    def _crossing(self, t0):
        """``(t, y)`` just past the first time in the last step where ‖X‖ exceeds the norm
        limit (bisection of the step's dense output)."""
        dense, nx = self._solver.dense_output(), self._nx
        self._dense_calls += 1

        def over(t):
            X = dense(t)[:nx]
            return math.sqrt(float(np.vdot(X, X))) > self.norm_limit

        lo, hi = t0, self._solver.t
        for _ in range(BISECTIONS):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if over(mid) else (mid, hi)
        self._retire()  # the solver stands at the step's end, not at hi
        return hi, dense(hi)

    @property
    def nfev_current(self) -> int:
        return 0 if self._solver is None else self._solver.nfev

    @property
    def nfev(self) -> int:
        """Evaluations of the field so far."""
        return self._nfev_done + self.nfev_current

    @property
    def rejected(self) -> int:
        """Steps tried and rejected so far."""
        solver = self._solver
        current = 0 if solver is None else self._attempts(solver)
        return self._attempts_done + current - self.accepted

    def batch(self, n_tokens: int) -> int:
        return 1


def explicit_states(problem, st: State, t_end: float, every: int, rtol: float, atol: float,
                    norm_limit: float = math.inf):
    """The states of :class:`ExplicitStepper`'s run of ``problem`` from ``st`` without its
    diagnostics.

    The same solver, first step and field (``∫D`` included: the error control, hence the
    steps, are the full run's), so the states are the full run's, bit for bit; the
    engine, the tracking bound's quadrature and the frames' diagnostics are left out.

    Returns
    -------
    (times, X, P, A, steps) or None
        Lists with one entry per recorded state (the first at ``t = 0``, then every
        ``every`` steps and the last at ``t_end``) and the run's step counts (as
        ``Trajectory.steps``); None if the run stops early (a failed step, a state not
        finite or past the norm limit): the full run says where and why.
    """
    N, d = st.X.shape
    stepper = ExplicitStepper(problem, rtol=rtol, atol=atol, t_end=t_end)
    solver, nx, nz = stepper.start_solver(st), N * d, N * N
    limit = norm_limit
    times, X, P, A = [st.t], [st.X], [st.P], [st.A]
    steps = 0
    while solver.status == "running":
        solver.step()
        y = solver.y
        if solver.status == "failed" or not np.all(np.isfinite(y)) \
                or math.sqrt(float(np.vdot(y[:nx], y[:nx]))) > limit:
            return None
        steps += 1
        if steps % every == 0 or solver.status != "running":
            times.append(solver.t)
            X.append(y[:nx].reshape(N, d).copy())
            P.append(y[nx:2 * nx].reshape(N, d).copy())
            A.append(en.rowsoftmax(centre_rows(y[2 * nx:2 * nx + nz].reshape(N, N)),
                                   centred=True))
    stepper.accepted = steps
    return times, X, P, A, {"accepted": steps, "rejected": stepper.rejected,
                            "method": stepper.method, "nfev": stepper.nfev}


__all__ = ["EXPLICIT_RATE", "ExplicitStepper", "bound_steps", "canonical_field",
           "explicit_states", "explicit_suits", "first_step"]
