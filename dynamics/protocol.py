"""What a setting changed mid-run does (:meth:`~dynamics.simulation.Simulation.sync`).

A setting the model does not read does nothing; ``dt`` and ``norm_limit`` apply from the
next step (:data:`LOOSE`); a setting that enters the model's energy (β, m, κ, k) continues
from the current state and does *protocol work* ``E_new(state) − E_old(state)``, added to
``work`` so that the energy balance keeps its origin ``E(0)``; γ and the damping change
the dynamics without work; every other setting restarts the run. The noise of
stochastic logits does work too (:func:`noise_kick`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import energy as en
from .noise import perturb_logits, softmax_with_log

#: Settings that change a run without any effect on its dynamics or energy.
LOOSE = ("dt", "norm_limit")

#: Settings whose change moves the relaxation's target or rate: a run continued after
#: one starts from logits that may lie far from it (a quench, graded as a start); after
#: any other change the logits stay where the run had them (a graded step took 32
#: sub-steps at every nudge of the confinement when the lag stayed above 0.5).
TARGET_SETTINGS = frozenset({"beta", "gamma", "kappa"})


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


def model_energy(spec, problem, st, log_a=None) -> float:
    """The energy ``E`` of model ``spec`` (a :class:`~dynamics.models.registry.ModelSpec`)
    in a state (0 for a model without one); ``log_a`` is ``log A`` when known."""
    if spec.energy is None:
        return 0.0
    if log_a is None and st.Z is not None:
        log_a = en.log_rowsoftmax(st.Z)
    return spec.energy(problem, st, log_a)


def restarts(spec, old: dict, new: dict) -> bool:
    """Whether going from the setting values ``old`` to ``new`` restarts a run of ``spec``:
    another model, or a change of a setting the model does not continue after."""
    return new["model"] != spec.name or any(
        new[k] != old[k] for k in spec.restart_settings())


def changed_settings(spec, old: dict, new: dict) -> dict:
    """``{name: (old, new)}`` of the settings ``spec`` reads that changed, :data:`LOOSE`
    ones aside."""
    return {k: (old[k], new[k]) for k in spec.reads()
            if k not in LOOSE and new[k] != old[k]}


def continue_run(spec, problem, st, values: dict, changed: dict):
    """``(problem, state, change)`` of a run continued after the settings ``changed``:
    the problem of the new ``values``, the state it continues from with the protocol work
    added to ``work`` (0 unless the energy changed), and the :class:`Change`."""
    before = model_energy(spec, problem, st)
    problem, st = spec.reproblem(problem, st, values)
    work = model_energy(spec, problem, st) - before  # 0 unless the energy changed
    if work != 0.0:
        st = replace(st, work=st.work + work)
    return problem, st, Change(t=st.t, values=changed, work=work)


def distant_start(changed: dict) -> bool:
    """Whether a change moves the relaxation's target or rate (:data:`TARGET_SETTINGS`):
    the stepper then starts as from a run's first state (stepper rule 9)."""
    return bool(changed.keys() & TARGET_SETTINGS)


__all__ = ["Change", "LOOSE", "TARGET_SETTINGS", "changed_settings", "continue_run",
           "distant_start", "model_energy", "restarts"]


def noise_kick(spec, problem, st, scale: float, xi):
    """The state ``st`` after a kick ``scale · ξ`` on its logits (stochastic logits, Theory
    page), the energy jump it makes added to ``work`` and ``noise_work``: work done by the
    noise, so that the balance keeps its origin."""
    Z = perturb_logits(st.Z, scale, xi)
    A, log_a = softmax_with_log(Z)
    kicked = replace(st, Z=Z, A=A)
    jump = (model_energy(spec, problem, kicked, log_a)
            - model_energy(spec, problem, st, softmax_with_log(st.Z)[1]))
    return replace(kicked, work=st.work + jump, noise_work=st.noise_work + jump)
