"""When a run has diverged: the checks of each step, the watch on its energy law, and the
one message that says so (:class:`~dynamics.simulation.Simulation` stops the run at the
first check that fails)."""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .diagnostics import of_model
from .models.part_one import confinement_notice

#: The energy law holds while ``|energy_residual|`` stays within this fraction of the run's
#: energy scale (:class:`LawWatch`); the integrator's error at the default ``dt`` is at
#: most a tenth of it.
LAW_TOLERANCE = 1e-2
#: The diagnostics the watch reads.
BALANCE = frozenset(("energy_residual", "dissipated", "work", "momentum_energy"))


def feature_norm(X) -> float:
    """``‖X‖``, the Frobenius norm of the features."""
    return math.sqrt(float(np.vdot(X, X)))


def is_finite(stepper, new, norm: float) -> bool:
    """Whether a new state is finite: its feature norm ``norm``, ``∫D + work`` and its
    logits (a stepper that takes the dissipation rate at the new logits shows a
    non-finite logit in the dissipated energy: no need to sum ``Z`` then)."""
    return (math.isfinite(norm) and math.isfinite(new.dissipated + new.work)
            and (getattr(stepper, "logits_in_dissipation", False) or new.Z is None
                 or math.isfinite(float(en.sum_reduce(new.Z, None)))))


def check_step(spec, problem, old, new, memo, norm: float, norm_limit: float):
    """``(reason, accept, memo)`` of a finite step from ``old`` to ``new``: ``reason`` why
    the run diverged there (None: it goes on), from the model's own check (``spec.check``,
    which may keep the new state: ``accept``; ``memo`` is what it remembers between
    steps) or the norm limit (the new state is not kept)."""
    if spec.check is not None:
        reason, accept, memo = spec.check(problem, old, new, memo, norm_limit)
        if reason is not None:
            return reason, accept, memo
    if norm > norm_limit:
        return f"feature norm {norm:.3g} exceeds {norm_limit:g}", False, memo
    return None, True, memo


def divergence_message(t: float, why: str, values: dict, problem, n_tokens: int) -> str:
    """The message of a run that diverged at ``t`` for the reason ``why``, with a hint
    where the confinement ``k`` is below ``2√N‖M‖₂`` (of the run's own ``M``)."""
    hint = confinement_notice(values, M=getattr(problem, "M", None), n_tokens=n_tokens)
    why = why if hint is None else f"{why}; {hint}"
    return f"diverged at t = {t:.4g}: {why}; the run stopped (Reset to start again)"


class LawWatch:
    """The watch on a run's energy law ``E(t) − E(0) + ∫D − W = 0`` (Theory page: the
    energy–dissipation law): a run whose ``|energy_residual|`` exceeds
    :data:`LAW_TOLERANCE` of its energy scale ``max(|E − E(0)|, |∫D|, |W|, |K − K(0)|, 1)``
    (the largest over the run so far; ``K`` the momentum term of ``E`` where it has one,
    ``momentum_energy``: a conservative run exchanges that much between its terms) has
    broken it and stops, back on the last state checked
    where it held: no broken balance is ever reported as data. The engine checks each
    state it completes (every batch of steps, and each state it reports); one watch per
    run, from :meth:`of`.

    Attributes
    ----------
    held : State
        A copy of the last state checked where the law held.
    scale : float
        The run's energy scale so far.
    """

    def __init__(self, symbol: str, state, momentum0: float = math.nan):
        self.symbol, self.scale, self.held = symbol, 1.0, state.copy()
        self.momentum0 = momentum0

    @classmethod
    def of(cls, spec, problem, state, energy0) -> LawWatch | None:
        """The watch of a run of ``spec`` from ``state``, or None where its model keeps no
        energy balance (no finite ``energy_residual``)."""
        diag, _ = of_model(spec, problem, state, energy0, BALANCE, arrays=False)
        if not math.isfinite(diag.get("energy_residual", math.nan)):
            return None
        return cls(spec.energy_symbol, state, diag.get("momentum_energy", math.nan))

    def check(self, spec, problem, state, energy0) -> tuple | None:
        """None while the law holds at ``state`` (its copy is then :attr:`held`), else
        ``(t, why, held)``: the time it was found broken, why, and the state to stop on."""
        if state.t == self.held.t:
            return None
        with np.errstate(all="ignore"):
            diag, _ = of_model(spec, problem, state, energy0, BALANCE, arrays=False)
            residual, dissipated = diag["energy_residual"], diag.get("dissipated", 0.0)
            work = diag.get("work", 0.0)
            exchanged = abs(diag.get("momentum_energy", math.nan) - self.momentum0)
            scale = max(self.scale, abs(residual + work - dissipated), abs(dissipated),
                        abs(work), exchanged if math.isfinite(exchanged) else 0.0)
        if abs(residual) <= LAW_TOLERANCE * scale:  # (False for NaN)
            self.scale, self.held = scale, state.copy()
            return None
        E = self.symbol
        share = abs(residual) / scale if math.isfinite(scale) else math.nan
        why = (f"the energy law {E}(t) − {E}(0) + ∫D − W = 0 broke: its residual "
               f"{residual:.3g} is {share:.3g} of the run's energy scale {scale:.3g} (at most "
               f"{LAW_TOLERANCE:g}); shown: t = {self.held.t:.4g}, the last state where it "
               "held; try a smaller dt (or steps chosen by rtol)")
        return state.t, why, self.held


__all__ = ["BALANCE", "LAW_TOLERANCE", "LawWatch", "check_step", "divergence_message",
           "feature_norm", "is_finite"]
