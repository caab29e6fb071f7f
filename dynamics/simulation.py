"""The stepping engine: one loop for every registered model.

:class:`Simulation` builds a model's problem and initial state from the settings (the
model's :class:`~dynamics.models.registry.ModelSpec`), advances it with the model's
stepper (the contract of :mod:`dynamics.steppers.base`), stops a run that diverges or
breaks its energy law with one message format (:mod:`dynamics.divergence`), and reports
:class:`~dynamics.frame.Frame` objects.

It is the one place that applies a setting change (:meth:`Simulation.sync`; what each
does, protocol work included, is written in :mod:`dynamics.protocol`).

It also adds the noise of stochastic logits (Theory page; :mod:`dynamics.noise`) after each
step, its energy jump added to ``work`` (:func:`~dynamics.protocol.noise_kick`); the stepper
drops what its carry took from the old attention (:meth:`~.steppers.base.Stepper.perturbed`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import energy as en
from . import models as registry
from . import protocol
from .diagnostics import of_model
from .divergence import LawWatch, check_step, divergence_message, feature_norm, is_finite
from .frame import DIVERGED, FAILED, RUNNING, Frame
from .given import build_with, check_initial_arrays
from .noise import NoiseClock, noise_scale
from .protocol import Change, model_energy
from .settings import Settings
from .state import State
from .steppers.base import DeferredOverflow, TooStiff


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
        instead of the seed's (a Transformer head's, biases included: :mod:`dynamics.heads`).
    kernel, value : array_like, shape (d, d), optional
        Part II's kernel ``A`` and value ``V`` instead of those of the settings.
    **values
        Setting values, used when ``settings`` is not given.

    Attributes
    ----------
    law : LawWatch or None
        The watch on the run's energy law (:class:`~dynamics.divergence.LawWatch`; None
        for a model without one, or set to None to step past a broken law on purpose).

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
        if isinstance(replica, bool) or not isinstance(replica, int | np.integer) or replica < 0:
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
        return model_energy(self.spec, self._problem, self._state)

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
        if protocol.restarts(self.spec, self._values, values):
            self._restart()  # (a build that fails leaves the run and _seen as they were)
            return "restart"
        self._seen = s.changes
        self._dt, self._norm_limit = values["dt"], values["norm_limit"]
        changed = protocol.changed_settings(self.spec, self._values, values)
        self._values = values
        self._sigma = self._noise_of(values)
        if not changed:
            return None
        self._problem, self._state, change = protocol.continue_run(
            self.spec, self._problem, self._state, values, changed)
        self._changes.append(change)
        self._stepper = self.spec.stepper(self._problem)
        self._carry = self._stepper.start(self._state)
        if not protocol.distant_start(changed):  # (stepper rule 9)
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
                    self._watch()
            finally:  # no state outside a call of advance has deferred work
                self._finish()
        self._watch()

    def use_stepper(self, stepper, dt: float | None = None) -> None:
        """Advance the current run with ``stepper`` (a :class:`~dynamics.steppers.base.Stepper`
        on :attr:`problem`, e.g. :class:`~dynamics.solvers.adaptive.AdaptiveStepper`), steps
        of ``dt`` (default: the setting), until a restart or a change that continues it."""
        self._finish()
        self._stepper, self._carry = stepper, stepper.start(self._state)
        if dt is not None:
            self._dt = float(dt)

    def frame(self, names=None, arrays: bool = True) -> Frame:
        """The frame of the current state: every diagnostic of the model, or only ``names``;
        without ``arrays`` no ``softmax``, ``target``, ``kl_rows`` or ``heads`` (``of_model``)."""
        st = self._state
        diag, arrays = of_model(self.spec, self._problem, st, self._energy0, names, arrays)
        return Frame(t=st.t, features=st.X.copy(), momenta=st.P.copy(),
                     attention=arrays.get("attention"), softmax=arrays.get("softmax"),
                     target=arrays.get("target"), kl_rows=arrays.get("kl_rows"),
                     diagnostics=diag, status=self.status, message=self.message,
                     tokens=tuple(getattr(self._problem, "tokens", ())),
                     heads=arrays.get("heads"))

    # -- the loop -------------------------------------------------------
    def _restart(self, first: bool = False, values: dict | None = None) -> None:
        """Build the run of the current settings (``values``: theirs, if read already) with
        the arrays given (:func:`~dynamics.given.build_with`); a build that fails changes
        nothing (its ``ValueError`` says why, and the next call tries again)."""
        s = self.settings
        seen, values = s.changes, s.values() if values is None else values
        spec = registry.get(values["model"])
        problem, state = build_with(spec, values, self._given, first)
        stepper = spec.stepper(problem)
        self._seen, self._values, self.spec = seen, values, spec
        self._dt, self._norm_limit = values["dt"], values["norm_limit"]
        self._sigma = self._noise_of(values)
        self._clock = NoiseClock.start(values["seed"], self.replica)
        self.status, self.message, self.diverged_at = RUNNING, "", None
        self._problem, self._state, self._stepper = problem, state, stepper
        self._carry = stepper.start(state)
        self._memo, self._changes = None, []
        self._energy0 = model_energy(spec, problem, state)
        self.law = LawWatch.of(spec, problem, state, self._energy0)

    def _noise_of(self, values) -> float:
        """σ for this model: 0 unless it reads ``logit_noise`` (it relaxes attention)."""
        return float(values["logit_noise"]) if "logit_noise" in self.spec.reads() else 0.0

    def _perturb(self, new, carry, h):
        """The state and carry after the noise of a step of ``h`` on the state's logits."""
        scale = noise_scale(self._sigma, self._problem.relaxation_rate, h)
        xi = self._clock.increment(new.Z.shape)
        kicked = protocol.noise_kick(self.spec, self._problem, new, scale, xi)
        return self._stepper.perturbed(kicked, carry, scale * en.oscillation(xi))

    def _advance_one(self) -> None:
        st, h, stepper = self._state, self._dt, self._stepper
        try:
            new, carry = stepper.step(st, self._carry, h)
            if new.noise_work != st.noise_work:  # (schemes build states without it)
                new = replace(new, noise_work=st.noise_work)
            if self._sigma > 0.0 and new.Z is not None:
                new, carry = self._perturb(new, carry, new.t - st.t)
            norm = feature_norm(new.X)
            finite = is_finite(stepper, new, norm)
        except FloatingPointError as err:
            self._diverge(st.t + h, f"non-finite value ({err})")
            return
        except TooStiff as err:
            self.status, self.message = FAILED, f"stopped at t = {st.t:.4g}: {err}"
            return
        if not finite:
            self._diverge(new.t, "non-finite value")
            return
        reason, accept, self._memo = check_step(self.spec, self._problem, st, new, self._memo,
                                                norm, self._norm_limit)
        if accept:
            self._state, self._carry = new, carry
        if reason is None:
            self._clock = self._clock.tick()
        else:
            self._diverge(new.t, reason)

    def _finish(self) -> None:
        try:
            self._state, self._carry = self._stepper.finish(self._state, self._carry)
        except DeferredOverflow as err:
            self._state, self._carry = err.state, err.carry
            self._diverge(err.t, f"non-finite value ({err})")

    def _watch(self) -> None:
        """Stop a run that broke its energy law, back where it held (not while holding)."""
        if self.law and self.status == RUNNING and not getattr(self._stepper, "hold", 0):
            broke = self.law.check(self.spec, self._problem, self._state, self._energy0)
            if broke is not None:
                t, why, self._state = broke
                self._carry = self._stepper.start(self._state)
                self._diverge(t, why)

    def _diverge(self, t, why) -> None:
        self.status, self.diverged_at = DIVERGED, float(t)
        self.message = divergence_message(t, why, self._values, self._problem,
                                          self._state.X.shape[0])


__all__ = ["Change", "Simulation"]
