"""The stepping engine: one loop for every registered model.

:class:`Simulation` builds a model's problem and initial state from the settings (the
model's :class:`~dynamics.models.registry.ModelSpec`), advances it with the model's
stepper (the contract of :mod:`dynamics.steppers.base`), stops a run that diverges with
one message format, and reports :class:`~dynamics.frame.Frame` objects.

It is the one place that decides what a setting change does (:meth:`Simulation.sync`):
a setting the model does not read does nothing; ``dt`` and ``norm_limit`` apply from the
next step; a setting that enters the model's energy (β, m, κ, k) continues from the
current state and does *protocol work* ``E_new(state) − E_old(state)``, added to
``work`` so that the energy balance keeps its origin ``E(0)``; γ and the damping change
the dynamics without work; every other setting restarts the run.

It also adds the noise of stochastic logits (``logit_noise`` σ > 0, Theory page:
stochastic logits) after each step of the scheme, for the models that read it: the logits
get ``σ √((1 − e^{−2λh})/(2λ)) ξ`` (:mod:`dynamics.noise`), the energy jump this makes is
added to ``work`` (and to ``noise_work``, its noise share), so the balance
``energy_residual`` stays at integrator accuracy, and the stepper drops what its carry
took from the old attention (:meth:`~dynamics.steppers.base.Stepper.perturbed`). The
increments of step ``n`` depend on ``(seed, replica, n)`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import energy as en
from . import models as registry
from .frame import DIVERGED, FAILED, RUNNING, Frame
from .models.part_one import UnusedArrays, confinement_notice
from .noise import NoiseClock, noise_scale, perturb_logits, softmax_with_log
from .settings import Settings
from .state import State, check_initial_arrays
from .steppers.base import DeferredOverflow, TooStiff

#: Settings that change a run without any effect on its dynamics or energy.
_LOOSE = ("dt", "norm_limit")


@dataclass(frozen=True)
class Change:
    """A setting change applied mid-run.

    Attributes
    ----------
    t : float
        When it took effect.
    values : dict of str to tuple
        ``{name: (old, new)}``.
    work : float
        Protocol work ``E_new(state) − E_old(state)`` (0 where no energy changed).
    """

    t: float
    values: dict
    work: float


#: Settings whose change moves the relaxation's target or rate: a run continued after
#: one starts from logits that may lie far from it (a quench, graded as a start); after
#: any other change the logits stay where the run had them (a graded step took 32
#: sub-steps at every nudge of the confinement when the lag stayed above 0.5).
TARGET_SETTINGS = frozenset({"beta", "gamma", "kappa"})


class Simulation:
    """A stepping engine for streaming one model.

    Parameters
    ----------
    settings : Settings, optional
        The settings; changed between steps (see :meth:`sync`).
    features, momenta : array_like, shape (N, d), optional
        Initial features and momenta instead of those drawn from the seed.
    attention : array_like, shape (N, N), optional
        Initial attention, strictly positive with rows summing to 1 (Part I).
    replica : int, optional
        Which noise stream of the seed the run draws (stochastic logits): replicas of one
        ensemble share the initial data and differ in their noise.
    score_matrix, value_matrix : array_like, shape (d, d), optional
        Part I's ``M`` (scores ``S = X M Xᵀ``) and value map ``W_V`` (``O = A X W_Vᵀ``)
        instead of those drawn from the seed. A Transformer head with queries
        ``X W_Qᵀ``, keys ``X W_Kᵀ`` has ``M = W_Qᵀ W_K/√d_h`` and ``W_V = W_O,h W_V,h``
        (:mod:`dynamics.heads` writes the convention down, biases included).
    kernel, value : array_like, shape (d, d), optional
        Part II's kernel ``A`` and value ``V`` instead of those of the settings.
    **values
        Setting values, used when ``settings`` is not given.

    Examples
    --------
    >>> sim = Simulation(Settings(model="canonical", beta=2.0))
    >>> frame = sim.step(100)
    >>> round(frame.t, 6)
    1.0
    """

    def __init__(self, settings: Settings | None = None, *, features=None, momenta=None,
                 attention=None, replica: int = 0, score_matrix=None, value_matrix=None,
                 kernel=None, value=None, **values):
        if isinstance(replica, bool) or not isinstance(replica, int | np.integer) \
                or replica < 0:
            raise ValueError(f"replica must be a non-negative integer, got {replica!r}")
        self.replica = int(replica)
        self.settings = settings if settings is not None else Settings(**values)
        values = self.settings.values()  # read once (a tenth of a millisecond each time)
        self._given = check_initial_arrays(
            values, features, momenta, attention, score_matrix=score_matrix,
            value_matrix=value_matrix, kernel=kernel, value=value)
        self._restart(first=True, values=values)

    # -- public interface -------------------------------------------------
    @property
    def t(self) -> float:
        """Current time."""
        return self._state.t

    @property
    def model(self) -> str:
        """The name of the model being run."""
        return self.spec.name

    @property
    def state(self) -> State:
        """A copy of the current state (steppers reuse the arrays of past states)."""
        return self._state.copy()

    @property
    def problem(self):
        """The model's frozen data (matrices and scalar settings) of the current run."""
        return self._problem

    @property
    def stepper(self):
        """The scheme advancing the run (``type(sim.stepper).order`` is its order)."""
        return self._stepper

    @property
    def noise_clock(self) -> NoiseClock:
        """Where the run's noise stands (its key and the steps taken): with the state and
        the carry, all a continued run needs to draw what it would have drawn."""
        return self._clock

    @property
    def logit_noise(self) -> float:
        """σ of the current run: ``logit_noise``, or 0 for a model that does not relax
        attention (it does not read the setting)."""
        return self._sigma

    @property
    def changes(self) -> tuple:
        """The setting changes applied mid-run since the start (:class:`Change`)."""
        return tuple(self._changes)

    def energy(self) -> float:
        """The model's energy ``E`` of the current state (``F``, ``H``, ``H_r``, ``Φ``; 0
        for models without one)."""
        return self._energy(self._problem, self._state)

    def reset(self) -> Frame:
        """Restart from the initial state of the current settings."""
        self._restart()
        return self.frame()

    def step(self, n: int = 1) -> Frame:
        """Advance ``n`` steps (fewer if the run stops) and return the latest frame."""
        self.advance(n)
        return self.frame()

    def sync(self) -> str | None:
        """Apply the settings changed since the last call.

        Returns
        -------
        str or None
            ``"restart"`` (the run started again), ``"continue"`` (the run goes on from
            its state, with protocol work where the energy changed) or None (nothing
            changed that matters to this model).
        """
        s = self.settings
        if s.changes == self._seen:
            return None
        values = s.values()
        if values["model"] != self.spec.name or any(
                values[k] != self._values[k] for k in self.spec.restart_settings()):
            self._restart()  # (a build that fails leaves the run and _seen as they were)
            return "restart"
        self._seen = s.changes
        self._dt, self._norm_limit = values["dt"], values["norm_limit"]
        changed = {k: (self._values[k], values[k]) for k in self.spec.reads()
                   if k not in _LOOSE and values[k] != self._values[k]}
        self._values = values
        self._sigma = self._noise_of(values)
        if not changed:
            return None
        st = self._state
        before = self._energy(self._problem, st)
        self._problem, st = self.spec.reproblem(self._problem, st, values)
        work = self._energy(self._problem, st) - before  # 0 unless the energy changed
        if work != 0.0:
            st = replace(st, work=st.work + work)
        self._state = st
        self._changes.append(Change(t=st.t, values=changed, work=work))
        self._stepper = self.spec.stepper(self._problem)
        self._carry = self._stepper.start(st)
        if not changed.keys() & TARGET_SETTINGS:  # no distant start (stepper rule 9)
            self._carry = self._stepper.continued(self._carry)
        return "continue"

    def advance(self, n: int = 1) -> None:
        """Advance ``n`` steps without building a frame (fewer if the run stops)."""
        if int(n) != n or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        self.sync()
        batch, left = self._stepper.batch(self._state.X.shape[0]), int(n)
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            try:
                while left > 0 and self.status == RUNNING:
                    for _ in range(min(batch, left)):
                        if self.status != RUNNING:
                            break
                        self._advance_one()
                    left -= batch
                    self._finish()
            finally:  # no state outside a call of advance has deferred work
                self._finish()

    def use_stepper(self, stepper, dt: float | None = None) -> None:
        """Advance the current run with ``stepper`` (a :class:`~dynamics.steppers.base.Stepper`
        on :attr:`problem`, e.g. :class:`~dynamics.adaptive.AdaptiveStepper`) instead of
        the model's own, with steps of ``dt`` (default: the setting), until a restart or
        a setting change that continues the run."""
        self._finish()
        self._stepper, self._carry = stepper, stepper.start(self._state)
        if dt is not None:
            self._dt = float(dt)

    def frame(self) -> Frame:
        """The frame of the current state, with every diagnostic of the model."""
        st = self._state
        diag, arrays = self.spec.diagnostics(self._problem, st, self._energy0)
        return Frame(t=st.t, features=st.X.copy(), momenta=st.P.copy(),
                     attention=arrays.get("attention"), softmax=arrays.get("softmax"),
                     target=arrays.get("target"), kl_rows=arrays.get("kl_rows"),
                     diagnostics=diag, status=self.status, message=self.message,
                     tokens=tuple(getattr(self._problem, "tokens", ())),
                     heads=arrays.get("heads"))

    # -- the loop -------------------------------------------------------
    def _restart(self, first: bool = False, values: dict | None = None) -> None:
        """Build the run of the current settings (``values``: their values, if read
        already); nothing changes if the build fails (its ``ValueError`` says why, and
        the next call tries again). Arrays given for the first run that a later model has
        no use for (momenta of a first-order flow) are left out of its run and serve the
        models that use them; the first run refuses them."""
        s = self.settings
        seen, values = s.changes, s.values() if values is None else values
        spec = registry.get(values["model"])
        try:  # user-given initial arrays serve every restart whose shapes they fit
            given = check_initial_arrays(values, **self._given)
        except ValueError:
            given = {}
        try:
            problem, state = spec.build(values, given)
        except UnusedArrays as unused:
            if first:
                raise
            problem, state = spec.build(
                values, {k: v for k, v in given.items() if k not in unused.names})
        stepper = spec.stepper(problem)
        self._seen, self._values, self.spec = seen, values, spec
        self._dt, self._norm_limit = values["dt"], values["norm_limit"]
        self._sigma = self._noise_of(values)
        self._clock = NoiseClock.start(values["seed"], self.replica)
        self.status, self.message, self.diverged_at = RUNNING, "", None
        self._problem, self._state, self._stepper = problem, state, stepper
        self._carry = stepper.start(state)
        self._memo = None
        self._changes = []
        self._energy0 = self._energy(problem, state)

    def _noise_of(self, values) -> float:
        """σ for this model: 0 unless it reads ``logit_noise`` (it relaxes attention)."""
        return float(values["logit_noise"]) if "logit_noise" in self.spec.reads() else 0.0

    def _perturb(self, new, carry, h):
        """The state after the noise of one step of ``h`` on its logits, and the carry the
        stepper continues from (the energy jump is work done by the noise)."""
        scale = noise_scale(self._sigma, self._problem.relaxation_rate, h)
        xi = self._clock.increment(new.Z.shape)
        Z = perturb_logits(new.Z, scale, xi)
        A, log_a = softmax_with_log(Z)
        perturbed = replace(new, Z=Z, A=A)
        jump = (self._energy(self._problem, perturbed, log_a)
                - self._energy(self._problem, new, softmax_with_log(new.Z)[1]))
        perturbed = replace(perturbed, work=new.work + jump,
                            noise_work=new.noise_work + jump)
        return self._stepper.perturbed(perturbed, carry, scale * en.oscillation(xi))

    def _energy(self, problem, st, log_a=None) -> float:
        """The model's energy ``E`` of a state (0 where it has none); ``log_a`` is
        ``log A`` when known."""
        if self.spec.energy is None:
            return 0.0
        if log_a is None and st.Z is not None:
            log_a = en.log_rowsoftmax(st.Z)
        return self.spec.energy(problem, st, log_a)

    def _advance_one(self) -> None:
        st, h, stepper = self._state, self._dt, self._stepper
        try:
            new, carry = stepper.step(st, self._carry, h)
            if new.noise_work != st.noise_work:  # (schemes build states without it)
                new = replace(new, noise_work=st.noise_work)
            if self._sigma > 0.0 and new.Z is not None:
                new, carry = self._perturb(new, carry, new.t - st.t)
            norm = math.sqrt(float(np.vdot(new.X, new.X)))
            # a stepper that takes the dissipation rate at the new logits shows a
            # non-finite logit in the dissipated energy: no need to sum Z
            finite = (math.isfinite(norm) and math.isfinite(new.dissipated + new.work)
                      and (getattr(stepper, "logits_in_dissipation", False) or new.Z is None
                           or math.isfinite(float(en._sum_reduce(new.Z, None)))))
        except FloatingPointError as err:
            self._diverge(st.t + h, f"non-finite value ({err})")
            return
        except TooStiff as err:
            self.status = FAILED
            self.message = f"stopped at t = {st.t:.4g}: {err}"
            return
        if not finite:
            self._diverge(new.t, "non-finite value")
            return
        if self.spec.check is not None:
            reason, accept, self._memo = self.spec.check(self._problem, st, new, self._memo,
                                                         self._norm_limit)
            if reason is not None:
                if accept:
                    self._state, self._carry = new, carry
                self._diverge(new.t, reason)
                return
        if norm > self._norm_limit:
            self._diverge(new.t, f"feature norm {norm:.3g} exceeds {self._norm_limit:g}")
        else:
            self._state, self._carry = new, carry
            self._clock = self._clock.tick()

    def _finish(self) -> None:
        try:
            self._state, self._carry = self._stepper.finish(self._state, self._carry)
        except DeferredOverflow as err:
            self._state, self._carry = err.state, err.carry
            self._diverge(err.t, f"non-finite value ({err})")

    def _diverge(self, t, why) -> None:
        self.status, self.diverged_at = DIVERGED, float(t)
        # a confinement k below 2√N‖M‖₂ (of the run's own M), or None
        hint = confinement_notice(self._values, M=getattr(self._problem, "M", None),
                                  n_tokens=self._state.X.shape[0])
        why = why if hint is None else f"{why}; {hint}"
        self.message = f"diverged at t = {t:.4g}: {why}; the run stopped (Reset to start again)"


__all__ = ["Change", "Simulation"]
