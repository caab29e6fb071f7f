"""Adaptive reference solutions with ``scipy.integrate.solve_ivp``.

The same equations as the streaming steppers, from each model's readable vector field
(``ModelSpec.extra["reference"]``), flattened for ``solve_ivp``: what a researcher would
write without this package. Used to validate the steppers and as the benchmarks' baseline.
"""

from __future__ import annotations

from scipy.integrate import solve_ivp

from . import models
from .settings import Settings


def problem_and_state(settings: Settings):
    """The problem and initial :class:`~dynamics.state.State` a Simulation starts from."""
    from .simulation import Simulation

    sim = Simulation(settings.copy())
    return sim.problem, sim.state


def solve_reference(settings: Settings, t_end: float, method: str = "DOP853",
                    rtol: float = 1e-10, atol: float = 1e-12, t_eval=None):
    """Solve the model of ``settings`` with ``solve_ivp`` from the Simulation's start.

    Returns
    -------
    result : scipy OdeResult
        ``y`` rows are the model's flattened variables: ``[X, P, Z, ∫D]`` (coupled
        models), ``[X, P]`` (reduced), ``[X]`` (transformer), ``[Z]`` (attention).
    unpack : callable
        ``unpack(y)`` gives a dict of named arrays (``X``, ``P``, ``Z``, ``dissipated``)
        from one column ``result.y[:, k]``.
    """
    prob, state = problem_and_state(settings)
    reference = models.get(settings.model).readable.get("reference")
    if reference is None:
        raise ValueError(f"model {settings.model!r} has no reference field")
    rhs, y0, unpack = reference(prob, state)
    result = solve_ivp(rhs, (0.0, t_end), y0, method=method, rtol=rtol, atol=atol,
                       t_eval=t_eval)
    return result, unpack


__all__ = ["problem_and_state", "solve_reference"]
