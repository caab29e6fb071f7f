"""Adaptive reference solutions with ``scipy.integrate.solve_ivp`` (MODEL.md Part III).

The same ODEs as :class:`~dynamics.simulation.Simulation`, in logit coordinates,
flattened for ``solve_ivp``: what a researcher would write without this package.
Used to validate the streaming integrators and as the baseline of the benchmarks.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from . import energy as en
from .models import (
    HAMILTONIAN_MODELS,
    Problem,
    effective_scores,
    feature_velocity,
    momentum_force,
    reduced_force,
    transformer_velocity,
)
from .settings import Settings


def problem_and_state(settings: Settings):
    """The :class:`Problem` and initial ``(X, P, Z)`` a Simulation starts from."""
    from .simulation import Simulation

    sim = Simulation(settings.copy())
    st = sim.state
    return sim.prob, sim.path, (st.X.copy(), st.P.copy(), st.Z.copy())


def coupled_rhs(model: str, prob: Problem, N: int, d: int):
    """``y ↦ dy/dt`` for ``y = [X, P, Z, ∫D]`` of a Hamiltonian model (§7)."""
    nx = N * d

    def rhs(_t, y):
        X = y[:nx].reshape(N, d)
        P = y[nx:2 * nx].reshape(N, d)
        Z = y[2 * nx:2 * nx + N * N].reshape(N, N)
        A = en.rowsoftmax(Z)
        S_hat = effective_scores(model, prob, X, P, A)
        W = Z - prob.beta * S_hat
        D = prob.relaxation_rate / prob.beta * en.row_variance(A, W)
        return np.concatenate([
            feature_velocity(model, prob, X, P, A).ravel(),
            momentum_force(model, prob, X, P, A).ravel(),
            (-prob.relaxation_rate * W).ravel(),
            [D],
        ])

    return rhs


def solve_reference(settings: Settings, t_end: float, method: str = "DOP853",
                    rtol: float = 1e-10, atol: float = 1e-12, t_eval=None):
    """Solve the model of ``settings`` with ``solve_ivp``.

    Returns
    -------
    scipy OdeResult
        ``y`` rows are ``[X, P, Z, ∫D]`` (Hamiltonian models), ``[X, P]`` (reduced),
        ``[X]`` (transformer) or ``[Z]`` (attention on its path), flattened.
    """
    prob, path, (X, P, Z) = problem_and_state(settings)
    N, d = X.shape
    model = settings.model
    if model in HAMILTONIAN_MODELS:
        rhs, y0 = coupled_rhs(model, prob, N, d), np.concatenate(
            [X.ravel(), P.ravel(), Z.ravel(), [0.0]])
    elif model == "reduced":
        def rhs(_t, y):
            Xs = y[:N * d].reshape(N, d)
            return np.concatenate([y[N * d:] / prob.mass, reduced_force(prob, Xs).ravel()])
        y0 = np.concatenate([X.ravel(), P.ravel()])
    elif model == "transformer":
        def rhs(_t, y):
            return transformer_velocity(prob, y.reshape(N, d)).ravel()
        y0 = X.ravel()
    else:
        def rhs(t, y):
            Xt, _ = path(t)
            return (prob.gamma * en.scores(Xt, prob.M) - prob.relaxation_rate
                    * y.reshape(N, N)).ravel()
        y0 = Z.ravel()
    return solve_ivp(rhs, (0.0, t_end), y0, method=method, rtol=rtol, atol=atol,
                     t_eval=t_eval)


__all__ = ["coupled_rhs", "problem_and_state", "solve_reference"]
