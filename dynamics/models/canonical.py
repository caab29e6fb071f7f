"""The canonical model (Theory page: "Canonical model").

``H = ‖P‖²/(2m) + F(A; X) + (k/2)‖X‖²``: the features follow Hamilton's equations with
attention as a parameter, attention the Fisher–Rao flow of the same ``H``:

    Ẋ = P/m,   Ṗ = A X Mᵀ + Aᵀ X M − kX,   C^H = C   (so Ŝ = S).

Energy–dissipation law: ``dH/dt = −D ≤ 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import diagnostics
from .. import energy as en
from ..steppers.tracked_verlet import TrackedEtdVerlet
from . import multi_head, part_one
from .registry import ModelSpec, register


def feature_velocity(prob, X, P, A):
    """``Ẋ = ∂H/∂P = P/m``, shape (N, d)."""
    return P / prob.mass


def momentum_force(prob, X, P, A):
    """``Ṗ = −∂H/∂X = f(A, X) − kX``, shape (N, d) (0 on fixed coordinates)."""
    return part_one.pin(prob, part_one.feature_force(A, X, prob.M) - prob.confinement * X)


def effective_scores(prob, X, P, A, S=None):
    """``Ŝ = S`` (the costs of ``H`` are those of ``F``), shape (N, N)."""
    return en.scores(X, prob.M) if S is None else S


def kinetic_energy(prob, X, P, A):
    """``‖P‖²/(2m)``."""
    return float(np.sum(P * P) / (2.0 * prob.mass))


def hamiltonian(prob, X, P, A, log_a=None, S=None):
    """``H = ‖P‖²/(2m) + F(A; X) + (k/2)‖X‖²``."""
    S = en.scores(X, prob.M) if S is None else S
    return (kinetic_energy(prob, X, P, A) + part_one.confinement_energy(prob, X)
            + en.free_energy(A, S, prob.beta, log_a))


@dataclass(frozen=True)
class CanonicalProblem(part_one.Problem):
    """The canonical model's data and its fused force."""

    #: Ŝ does not depend on A.
    attention_feedback = False

    def force(self, X, A, XM=None, XMt=None):
        """``Ṗ = A X Mᵀ + Aᵀ X M − kX`` from ``X M`` and ``X Mᵀ`` when known; and None
        (no ``G``). The fused twin of :func:`momentum_force`."""
        XM = X @ self.M if XM is None else XM
        force = A.T @ XM
        force += A @ (X @ self.M.T if XMt is None else XMt)
        if self.confinement:
            force -= self.confinement * X
        return part_one.pin(self, force), None


def coupled_reference(prob, state, velocity, force, effective):
    """``(rhs, y0, unpack)`` for ``solve_ivp`` of a coupled model, ``y = [X, P, Z, ∫D]``:
    the readable field in logits, ``dZ/dt = −λ (Z − βŜ)``."""
    N, d = state.X.shape
    nx = N * d

    def rhs(_t, y):
        X = y[:nx].reshape(N, d)
        P = y[nx:2 * nx].reshape(N, d)
        Z = y[2 * nx:2 * nx + N * N].reshape(N, N)
        A = en.rowsoftmax(Z)
        W = Z - prob.beta * effective(prob, X, P, A)
        D = prob.relaxation_rate / prob.beta * en.row_variance(A, W)
        return np.concatenate([velocity(prob, X, P, A).ravel(), force(prob, X, P, A).ravel(),
                               (-prob.relaxation_rate * W).ravel(), [D]])

    def unpack(y):
        return {"X": y[:nx].reshape(N, d), "P": y[nx:2 * nx].reshape(N, d),
                "Z": y[2 * nx:2 * nx + N * N].reshape(N, N), "dissipated": y[-1]}

    y0 = np.concatenate([state.X.ravel(), state.P.ravel(), state.Z.ravel(), [0.0]])
    return rhs, y0, unpack


def _energy(prob, state, log_a=None, S=None):
    return hamiltonian(prob, state.X, state.P, state.A, log_a, diagnostics.scores_of(prob, state)
                       if S is None else S)


def _kinetic(prob, state):
    return kinetic_energy(prob, state.X, state.P, state.A)


def _build(values, given):
    return part_one.build(values, given, problem_type=CanonicalProblem, tracked=True)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=_energy, kinetic=_kinetic, **subset)


def _reference(prob, state):
    return coupled_reference(prob, state, feature_velocity, momentum_force, effective_scores)


SPEC = register(ModelSpec(
    name="canonical", part=1, title="Canonical model", section="canonical",
    settings=("gamma", "logit_noise", "mass", "confinement", "init_attention", "init_momentum"),
    continue_settings=("dt", "gamma", "logit_noise"),
    energy_settings=("beta", "mass", "confinement"),
    equations=r"""
<p><b>Canonical model</b>: $H = \frac{\|P\|^2}{2m} + F(A;X) + \frac{k}{2}\|X\|^2$,
$$\dot X = P/m, \quad \dot P = A X M^\top + A^\top X M - kX, \quad C^H = C,$$
so attention relaxes towards $A^*(X)$: $\dot Z = \gamma S - \lambda Z$.
Energy–dissipation law: $\dfrac{dH}{dt} = -D \le 0$, i.e.
$H(t) - H(0) + \int_0^t D\,ds = 0$.</p>""",
    look_for="H only decreases, the residual stays near 0; large γ approaches the reduced "
             "model.",
    # heads="all" (weights="minilm"): every head of the layer (Theory: several heads)
    real_heads="all",
    build=multi_head.either_build(_build),
    reproblem=multi_head.either(part_one.retrack, multi_head.retrack),
    stepper=multi_head.either_stepper(TrackedEtdVerlet),
    energy=multi_head.either(_energy, multi_head.energy),
    diagnostics=multi_head.either(_diagnostics, multi_head.diagnostics),
    subset_diagnostics=True,
    readable={"reference": _reference, "velocity": feature_velocity, "force": momentum_force,
           "effective_scores": effective_scores, "hamiltonian": hamiltonian},
))
