"""The cotangent lift (Theory page: "Cotangent lift").

``H = ⟨P, A X W_Vᵀ⟩ + F(A; X) + (k/2)‖X‖²``: the feature velocity *is* the attention
output,

    Ẋ = A X W_Vᵀ,   Ṗ = −Aᵀ P W_V + f(A, X) − kX,   C^H = C + P W_V Xᵀ,

so the attention target is ``rowsoftmax(βŜ)``, ``Ŝ = S − P W_V Xᵀ``. The momentum term
``⟨P, A X W_Vᵀ⟩`` of ``H`` has either sign (it is not a kinetic energy): frames report it
as ``momentum_energy`` and ``kinetic_energy`` as NaN (not applicable). Linear in ``P``,
``H`` has no lower bound, and ``k`` does not act on ``Ẋ``: at N = 16 attention ends on a
vertex while ``H`` falls to about −1.26e5 by t = 13 and ``‖P‖`` grows as ``e^{0.38 t}``
(Theory page: "The cotangent lift: an energy without a floor").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import diagnostics
from .. import energy as en
from ..logits import centre_rows
from ..steppers.strang import Strang
from . import part_one
from .canonical import coupled_reference
from .registry import ModelSpec, register


def feature_velocity(prob, X, P, A):
    """``Ẋ = ∂H/∂P = A X W_Vᵀ``, shape (N, d)."""
    return A @ (X @ prob.W_V.T)


def momentum_force(prob, X, P, A):
    """``Ṗ = −∂H/∂X = f(A, X) − Aᵀ P W_V − kX``, shape (N, d)."""
    force = part_one.feature_force(A, X, prob.M) - prob.confinement * X
    force -= A.T @ (P @ prob.W_V)
    return force


def effective_scores(prob, X, P, A, S=None):
    """``Ŝ = S − P W_V Xᵀ``, shape (N, N)."""
    S = en.scores(X, prob.M) if S is None else S
    return S - (P @ prob.W_V) @ X.T


def momentum_term(prob, X, P, A):
    """``⟨P, A X W_Vᵀ⟩``: the momentum part of ``H`` (either sign)."""
    return float(np.sum(P * (A @ (X @ prob.W_V.T))))


def hamiltonian(prob, X, P, A, log_a=None, S=None):
    """``H = ⟨P, A X W_Vᵀ⟩ + F(A; X) + (k/2)‖X‖²``."""
    S = en.scores(X, prob.M) if S is None else S
    H = momentum_term(prob, X, P, A) + part_one.confinement_energy(prob, X)
    H += en.free_energy(A, S, prob.beta, log_a)
    return H


@dataclass(frozen=True)
class CotangentLiftProblem(part_one.Problem):
    """The cotangent lift's data and its fused field."""

    def target(self, X, P, out=None):
        """``βŜ = β (X M − P W_V) Xᵀ`` with row maxima 0, one product."""
        T = np.matmul(self.beta * (X @ self.M - P @ self.W_V), X.T, out=out)
        return centre_rows(T, out=T)

    def target_rate(self, X, P, X_dot, P_dot):
        """``d(βŜ)/dt = β ((Ẋ M − Ṗ W_V) Xᵀ + (X M − P W_V) Ẋᵀ)`` along ``(Ẋ, Ṗ)``."""
        return self.beta * ((X_dot @ self.M - P_dot @ self.W_V) @ X.T
                            + (X @ self.M - P @ self.W_V) @ X_dot.T)

    def frozen_field(self, X, P, A):
        """``(Ẋ, Ṗ) = (A X W_Vᵀ, A X Mᵀ + Aᵀ (X M − P W_V) − kX)`` with ``A`` frozen: the
        fused twin of :func:`feature_velocity` and :func:`momentum_force`."""
        d = X.shape[1]
        Y = A @ np.hstack([X @ self.W_V.T, X @ self.M.T])
        P_dot = A.T @ (X @ self.M - P @ self.W_V)
        P_dot += Y[:, d:]
        if self.confinement:
            P_dot -= self.confinement * X
        return Y[:, :d], P_dot


#: The tracking bound (the target is not ``A*``) and the kinetic energy (the momentum term
#: of ``H`` is ``momentum_energy``, of either sign).
NOT_APPLICABLE = ("kl_bound", "kinetic_energy")


def _energy(prob, state, log_a=None, S=None):
    return hamiltonian(prob, state.X, state.P, state.A, log_a,
                       diagnostics.scores_of(prob, state) if S is None else S)


def _momentum(prob, state):
    return momentum_term(prob, state.X, state.P, state.A)


def _effective(prob, state, S):
    return effective_scores(prob, state.X, state.P, state.A, S)


def _build(values, given):
    return part_one.build(values, given, problem_type=CotangentLiftProblem, free_motion=False)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=_energy, momentum=_momentum,
                                effective_scores=_effective, not_applicable=NOT_APPLICABLE,
                                **subset)


def _reference(prob, state):
    return coupled_reference(prob, state, feature_velocity, momentum_force, effective_scores)


SPEC = register(ModelSpec(
    name="cotangent_lift", part=1, title="Cotangent lift", section="cotangent_lift",
    settings=("gamma", "logit_noise", "confinement", "init_attention", "init_momentum"),
    continue_settings=("dt", "gamma", "logit_noise"),
    energy_settings=("beta", "confinement"),
    equations=r"""
<p><b>Cotangent lift</b>: $H = \langle P, A X W_V^\top\rangle + F(A;X)$,
$$\dot X = A X W_V^\top,\quad \dot P = -A^\top P W_V + f(A,X),\quad C^H = C + P W_V X^\top.$$
The feature velocity <i>is</i> the attention output. Law: $dH/dt = -D \le 0$
(the tracking bound is n/a: the target is $\mathrm{rowsoftmax}(\beta\hat S)$,
$\hat S = S - P W_V X^\top$). There is no kinetic energy: the momentum term
$\langle P, A X W_V^\top\rangle$ of $H$ (the momentum energy) has either sign, so $H$ has
no floor (<a href="#the-cotangent-lift-an-energy-without-a-floor">an energy without a
floor</a>).</p>""",
    look_for="The features move with the attention output; H only decreases, without a floor.",
    build=_build, reproblem=part_one.same_state,
    stepper=Strang, energy=_energy, diagnostics=_diagnostics,
    not_applicable=NOT_APPLICABLE,
    readable={"reference": _reference, "velocity": feature_velocity, "force": momentum_force,
           "effective_scores": effective_scores, "hamiltonian": hamiltonian},
))
