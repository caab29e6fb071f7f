"""The inertial lab's first experiment: momentum on a quadratic, the base case (Theory
page, Part II: "Momentum on a quadratic").

:func:`run_momentum_experiment` takes the lab's settings and runs, from the same tokens
``X(0)`` at rest in the bowl ``f(x) = ½ xᵀ A x`` of the lab's kernel ``A``:

1. the gradient flow ``ẋ = −∇f(x)`` (RK4 on the model's :func:`gradient_flow`);
2. the heavy ball ``α = c`` with the lab's ``alpha`` (when it is not the critical one);
3. the critically damped heavy ball ``α = 2√a_min``;
4. Nesterov ``α = r/(t + t0)`` with the lab's ``nesterov_r`` and ``nesterov_t0`` (``c = 0``;
   ``t0 = 0`` is Su–Boyd–Candès's start),

each damped run through :class:`dynamics.Simulation` of the registered model
``momentum_quadratic``, to the horizon ``T = 10/√a_min`` (at most :data:`HORIZON_LIMIT`)
in at most :data:`MOMENTUM_STEPS` steps. It returns ``f − f*`` of every run, the paths of
the tracked token, the Su–Boyd–Candès guide ``(r − 1)² ‖X(0)‖² / (2t²)`` and how far each
run is from its closed form (:func:`dynamics.inertial.quadratic.closed_form`).

Import it as ``dynamics.inertial.momentum`` (it uses :class:`~dynamics.Simulation`, like
:mod:`dynamics.inertial.experiments`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..models.momentum_quadratic import gradient_flow
from ..settings import Settings
from ..simulation import Simulation
from ..steppers.rk4 import rk4_step
from .damping import Damping
from .experiments import lab_settings
from .lab_curves import Curve, finite_points
from .quadratic import closed_form, gradient_flow_solution, objective, rate_bound

#: The model the experiment runs (a lab preset with this ``model`` shows it).
MOMENTUM_MODEL = "momentum_quadratic"
#: The horizon is this many times the slowest time scale ``1/√a_min`` …
HORIZON_SCALE = 10.0
#: … but not later than this.
HORIZON_LIMIT = 200.0
#: The most steps of one run (the step is ``min(dt, T/MOMENTUM_STEPS)``, rounded to fit ``T``).
MOMENTUM_STEPS = 1000
#: The token whose path in the plane is drawn (its first two coordinates).
TRACKED = 0
#: The runs, in the order drawn.
RUNS = ("gradient_flow", "heavy_ball", "critical", "nesterov")


@dataclass(frozen=True)
class MomentumRun:
    """One run of the experiment.

    Attributes
    ----------
    label : str
        Its name in legends ("Nesterov α = 3/t"), short enough for two columns of
        them under a plot at 1024 px.
    damping : Damping or None
        ``α(t)`` (None: the gradient flow).
    t : ndarray, shape (K,)
        Times, ``t[0] = 0``.
    X : ndarray, shape (K, N, d)
        Tokens.
    suboptimality : ndarray, shape (K,)
        ``f(X(t)) − f*``.
    energy_residual : ndarray, shape (K,)
        ``H(t) − H(0) + ∫₀ᵗ α|ẋ|²`` (zeros for the gradient flow).
    exact_error : float or None
        ``max |X − X_exact|`` over the run, where a closed form is known.
    """

    label: str
    damping: Damping | None
    t: np.ndarray
    X: np.ndarray
    suboptimality: np.ndarray
    energy_residual: np.ndarray
    exact_error: float | None

    def gap_curve(self) -> Curve:
        """``(t, f − f*)`` for ``t > 0`` and ``f − f* > 0`` (a log–log plot)."""
        keep = self.t > 0
        return finite_points(self.t[keep], self.suboptimality[keep], positive=True)

    def path(self, token: int = TRACKED) -> Curve:
        """The first two coordinates of ``token`` along the run (``y = 0`` when ``d = 1``)."""
        X = self.X[:, token, :]
        return Curve(X[:, 0].copy(), X[:, 1].copy() if X.shape[1] > 1 else np.zeros(len(X)))


@dataclass(frozen=True)
class MomentumResult:
    """Everything the lab's momentum plots show.

    Attributes
    ----------
    settings : dict
        The setting values of the experiment.
    A : ndarray, shape (d, d)
        The bowl ``f(x) = ½ xᵀ A x``.
    a : ndarray, shape (d,)
        Eigenvalues of ``A``, ascending.
    X0 : ndarray, shape (N, d)
        The tokens every run starts from, at rest.
    horizon, dt : float
        End time and step of the runs.
    runs : dict of str to MomentumRun
        Of :data:`RUNS` (``"heavy_ball"`` left out when ``alpha`` is the critical one).
    bound : Curve
        ``(t, (r − 1)² ‖X0‖² / (2t²))``: Su–Boyd–Candès's bound for Nesterov (a bound for
        ``r ≥ 3`` and ``t0 = 0``; a ``1/t²`` guide otherwise), where it says something:
        at the times it is below ``f(X0) − f*`` (which bounds every damped run already,
        ``f ≤ H ≤ H(0)``).
    bound_holds : bool or None
        Nesterov's ``f − f*`` is at or below :attr:`bound` at every frame ``t > 0`` (None
        when it is no theorem: ``r < 3`` or ``t0 > 0``).
    """

    settings: dict
    A: np.ndarray
    a: np.ndarray
    X0: np.ndarray
    horizon: float
    dt: float
    runs: dict
    bound: Curve
    bound_holds: bool | None

    def leader(self, t: float) -> str:
        """The run with the smallest ``f − f*`` at the frame nearest ``t``."""
        return min(self.runs, key=lambda k: self.runs[k].suboptimality[
            int(np.argmin(np.abs(self.runs[k].t - t)))])

    def ahead_from(self, key: str, others) -> float | None:
        """The time from which run ``key``'s ``f − f*`` is at or below that of every run
        of ``others`` at every frame to the end (None: not even at the last frame)."""
        gap = self.runs[key].suboptimality
        rest = np.min([self.runs[k].suboptimality for k in others], axis=0)
        behind = np.flatnonzero(gap > rest)
        if len(behind) and behind[-1] == len(gap) - 1:
            return None
        return float(self.runs[key].t[behind[-1] + 1 if len(behind) else 0])


def nesterov_label(r: float, t0: float) -> str:
    """The Nesterov run's name: its damping ``α = r/(t + t0)``."""
    return f"Nesterov α = {r:g}/t" if t0 == 0 else f"Nesterov α = {r:g}/(t + {t0:g})"


def horizon_of(a: np.ndarray) -> float:
    """``T = HORIZON_SCALE / √a_min``, at most :data:`HORIZON_LIMIT`."""
    return min(HORIZON_LIMIT, HORIZON_SCALE / math.sqrt(float(np.min(a))))


def critical_damping(a: np.ndarray) -> float:
    """``c = 2√a_min``: the slowest direction critically damped."""
    return 2.0 * math.sqrt(float(np.min(a)))


def damped_run(settings: Settings, X0: np.ndarray, damping: Damping, steps: int,
               label: str) -> MomentumRun:
    """``steps`` steps of ``settings.dt`` of the model from ``X0`` at rest with ``damping``:
    the problem and the start as :class:`~dynamics.Simulation` builds them, advanced by
    the model's own stepper, every state kept (without the engine's per-step stop test,
    which a bowl never trips: ``H`` only decreases)."""
    s = settings.copy(model=MOMENTUM_MODEL, damping=damping.kind, alpha=damping.c,
                      nesterov_r=damping.r, nesterov_t0=damping.t0)
    sim = Simulation(s, features=X0)
    problem, st, h = sim.problem, sim.state, s.dt
    H0 = sim.energy()
    stepper = sim.spec.stepper(problem)
    carry = stepper.start(st)
    states = [st]
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for _ in range(steps):
            st, carry = stepper.step(st, carry, h)
            states.append(st)
    t = np.array([x.t for x in states])
    X = np.array([x.X for x in states])
    P = np.array([x.P for x in states])
    A = problem.A
    f = 0.5 * np.einsum("kia,ab,kib->k", X, A, X)
    residual = (f + 0.5 * np.einsum("kia,kia->k", P, P) - H0
                + np.array([x.dissipated for x in states]))
    exact = closed_form(A, X0, t, damping)
    error = None if exact is None else float(np.max(np.abs(X - exact)))
    return MomentumRun(label, damping, t, X, f, residual, error)


def gradient_run(problem, X0: np.ndarray, h: float, steps: int) -> MomentumRun:
    """RK4 on the gradient flow ``ẋ = −∇f(x)`` from ``X0``: ``steps`` steps of ``h``."""
    X, out = X0, [X0]
    for _ in range(steps):
        X = rk4_step(lambda _t, Z: gradient_flow(problem, Z), 0.0, X, h)
        out.append(X)
    t = h * np.arange(steps + 1)
    X = np.array(out)
    f = np.array([objective(x, problem.A) for x in X])
    error = float(np.max(np.abs(X - gradient_flow_solution(problem.A, X0, t))))
    return MomentumRun("gradient flow", None, t, X, f, np.zeros(len(t)), error)


def run_momentum_experiment(settings: Settings | Mapping, **changes) -> MomentumResult:
    """Run the base case with the lab's settings.

    Parameters
    ----------
    settings : Settings or mapping
        Reads ``kernel_diag``, ``dim``, ``matrix_draw``, ``n_tokens``, ``cloud``,
        ``second_moment``, ``seed`` (the bowl and the tokens, as the model builds them),
        ``alpha`` (the heavy ball's ``c``), ``nesterov_r``, ``nesterov_t0`` and ``dt``; not
        changed.
    **changes
        Setting values replacing those of ``settings`` for this run.

    Returns
    -------
    MomentumResult

    Raises
    ------
    ValueError
        A setting is refused, ``kernel_diag`` does not parse or is not positive, or
        ``n_tokens < dim``.
    """
    s = lab_settings(settings, **{"model": MOMENTUM_MODEL, **changes})
    start = Simulation(s)  # the bowl and the tokens, as the model builds them
    problem, X0 = start.problem, start.state.X
    a = np.linalg.eigvalsh(problem.A)
    horizon = horizon_of(a)
    steps = min(MOMENTUM_STEPS, max(1, math.ceil(horizon / s.dt - 1e-9)))
    h = horizon / steps
    s = s.copy(dt=h)
    runs = {"gradient_flow": gradient_run(problem, X0, h, steps)}
    critical = critical_damping(a)
    if not math.isclose(s.alpha, critical, rel_tol=1e-9):
        runs["heavy_ball"] = damped_run(s, X0, Damping("constant", s.alpha), steps,
                                        f"heavy ball α = {s.alpha:g}")
    runs["critical"] = damped_run(s, X0, Damping("constant", critical), steps,
                                  f"critical α = {critical:.3g}")
    nesterov = Damping("nesterov", 0.0, s.nesterov_r, s.nesterov_t0)
    runs["nesterov"] = damped_run(s, X0, nesterov, steps,
                                  nesterov_label(s.nesterov_r, s.nesterov_t0))
    run = runs["nesterov"]
    later = run.t > 0
    bound = rate_bound(s.nesterov_r, X0, run.t[later])
    holds = None
    if s.nesterov_r >= 3 and s.nesterov_t0 == 0:
        # a tolerance of the scheme's error (the bound is attained only as t → 0)
        holds = bool(np.all(run.suboptimality[later] <= bound * (1 + 1e-9) + 1e-14))
    useful = bound <= objective(X0, problem.A)
    return MomentumResult(
        settings=s.values(), A=problem.A, a=a, X0=X0, horizon=horizon, dt=h, runs=runs,
        bound=finite_points(run.t[later][useful], bound[useful], positive=True),
        bound_holds=holds)


__all__ = [
    "HORIZON_LIMIT", "HORIZON_SCALE", "MOMENTUM_MODEL", "MOMENTUM_STEPS", "RUNS", "TRACKED",
    "MomentumResult", "MomentumRun", "critical_damping", "damped_run", "gradient_run",
    "horizon_of", "run_momentum_experiment",
]
