"""When a run has diverged: the checks of each step, and the one message that says so
(:class:`~dynamics.simulation.Simulation` stops the run at the first check that fails)."""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .models.part_one import confinement_notice


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


__all__ = ["check_step", "divergence_message", "feature_norm", "is_finite"]
