"""The reduced (softmax-slaved) Hamiltonian (Theory page: "Reduced model").

Attention is slaved to the features, ``A ≡ A*(X)``, and
``H_r = ‖P‖²/(2m) + Φ(X) + (k/2)‖X‖²`` with the log-sum-exp potential ``Φ``:

    Ẋ = P/m,   Ṗ = f(A*(X), X) − kX   (envelope theorem).

Conservative: ``H_r`` is conserved; the γ → ∞ limit of the canonical model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import diagnostics
from .. import energy as en
from ..steppers.verlet import Verlet
from . import part_one
from .canonical import CanonicalProblem, kinetic_energy
from .registry import SLAVED_ZERO, ModelSpec, register


def momentum_force(prob, X):
    """``Ṗ = f(A*(X), X) − kX``, shape (N, d)."""
    A_star = en.softmax_attention(en.scores(X, prob.M), prob.beta)
    return part_one.pin(prob, part_one.feature_force(A_star, X, prob.M)
                        - prob.confinement * X)


def hamiltonian(prob, X, P, S=None):
    """``H_r = ‖P‖²/(2m) + Φ(X) + (k/2)‖X‖²``."""
    S = en.scores(X, prob.M) if S is None else S
    H = kinetic_energy(prob, X, P, None) + part_one.confinement_energy(prob, X)
    return H + en.potential(S, prob.beta)


@dataclass(frozen=True)
class ReducedProblem(part_one.SlavedProblem, CanonicalProblem):
    """The reduced model's data: the canonical force at ``A = A*(X)``, slaved attention."""


def _energy(prob, state, log_a=None, S=None):
    return hamiltonian(prob, state.X, state.P, diagnostics.scores_of(prob, state) if S is None
                       else S)


def _kinetic(prob, state):
    return kinetic_energy(prob, state.X, state.P, state.A)


def _build(values, given):
    return part_one.build(values, given, problem_type=ReducedProblem, slaved=True,
                          free_motion=False)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=_energy, kinetic=_kinetic,
                                slaved=True, **subset)


def _reference(prob, state):
    """``(rhs, y0, unpack)`` for ``solve_ivp``, ``y = [X, P]``."""
    N, d = state.X.shape

    def rhs(_t, y):
        X = y[:N * d].reshape(N, d)
        return np.concatenate([y[N * d:] / prob.mass, momentum_force(prob, X).ravel()])

    def unpack(y):
        return {"X": y[:N * d].reshape(N, d), "P": y[N * d:].reshape(N, d)}

    return rhs, np.concatenate([state.X.ravel(), state.P.ravel()]), unpack


SPEC = register(ModelSpec(
    name="reduced", part=1, title="Reduced (softmax-slaved) Hamiltonian", section="reduced",
    settings=("mass", "confinement", "init_momentum"),
    energy_settings=("beta", "mass", "confinement"),
    continue_settings=("dt",),
    equations=r"""
<p><b>Reduced (softmax-slaved) Hamiltonian</b>: $A \equiv A^*(X)$,
$$H_r = \frac{\|P\|^2}{2m} + \Phi(X) + \frac{k}{2}\|X\|^2,\qquad \dot X = P/m,\quad
\dot P = f(A^*(X), X) - kX.$$
Conservative: $H_r$ is conserved (no dissipation, KL $\equiv 0$). It is the
$\gamma\to\infty$ limit of the canonical model.</p>""",
    look_for="Hᵣ stays constant (bounded oscillation, no drift); KL and D are zero.",
    energy_symbol="Hᵣ", identically_zero=SLAVED_ZERO,
    build=_build, reproblem=part_one.reslave,
    stepper=Verlet, energy=_energy, diagnostics=_diagnostics,
    readable={"reference": _reference, "force": momentum_force, "hamiltonian": hamiltonian},
))
