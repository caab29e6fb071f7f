"""The value-matching model (Theory page: "Value matching").

With ``O = A X W_Vᵀ`` and ``R = X − O``,
``H = ‖P‖²/(2m) + F(A; X) + (κ/2)‖R‖² + (k/2)‖X‖²``:

    Ẋ = P/m,   Ṗ = f(A, X) − κ (R − Aᵀ R W_V) − kX,   C^H = C − κ R W_V Xᵀ,

so the attention target ``rowsoftmax(βŜ)``, ``Ŝ = S + κ R W_V Xᵀ``, depends on ``A``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import diagnostics
from .. import energy as en
from ..steppers.etd_verlet import EtdVerlet
from . import part_one
from .canonical import coupled_reference, feature_velocity, kinetic_energy
from .registry import ModelSpec, register


def value_residual(A, X, W_V):
    """``R = X − A X W_Vᵀ``, shape (N, d)."""
    return X - A @ (X @ W_V.T)


def momentum_force(prob, X, P, A):
    """``Ṗ = f(A, X) − κ (R − Aᵀ R W_V) − kX``, shape (N, d)."""
    R = value_residual(A, X, prob.W_V)
    force = part_one.feature_force(A, X, prob.M) - prob.confinement * X
    force -= prob.kappa * (R - A.T @ (R @ prob.W_V))
    return part_one.pin(prob, force)


def effective_scores(prob, X, P, A, S=None):
    """``Ŝ = S + κ R W_V Xᵀ``, shape (N, N)."""
    S = en.scores(X, prob.M) if S is None else S
    R = value_residual(A, X, prob.W_V)
    return S + prob.kappa * (R @ prob.W_V) @ X.T


def hamiltonian(prob, X, P, A, log_a=None, S=None):
    """``H = ‖P‖²/(2m) + F(A; X) + (κ/2)‖R‖² + (k/2)‖X‖²``."""
    S = en.scores(X, prob.M) if S is None else S
    H = kinetic_energy(prob, X, P, A) + part_one.confinement_energy(prob, X)
    H += en.free_energy(A, S, prob.beta, log_a)
    R = value_residual(A, X, prob.W_V)
    return H + 0.5 * prob.kappa * float(np.sum(R * R))


@dataclass(frozen=True)
class ValueMatchingProblem(part_one.Problem):
    """Value matching's data and its fused force."""

    #: Ŝ = G Xᵀ depends on A.
    attention_feedback = True

    def force(self, X, A, XM=None, XMt=None):
        """``(Ṗ, G)`` with ``Ŝ = G Xᵀ``, ``G = X M + κ R W_V``: the fused twin of
        :func:`momentum_force` and :func:`effective_scores`."""
        XM = X @ self.M if XM is None else XM
        d = X.shape[1]
        Y = A @ np.hstack([X @ self.M.T, X @ self.W_V.T])
        R = X - Y[:, d:]  # the value residual X − A X W_Vᵀ
        G = XM + self.kappa * (R @ self.W_V)
        force = A.T @ G
        force += Y[:, :d]
        force -= self.kappa * R
        if self.confinement:
            force -= self.confinement * X
        return part_one.pin(self, force), G


    def score_rate(self, X, X_dot, Z, A, S_hat):
        """``dŜ/dt = Ġ Xᵀ + G Ẋᵀ``, ``Ġ = Ẋ M + κ (Ẋ − Ȯ) W_V``, ``Ȯ = Ȧ X W_Vᵀ + A Ẋ W_Vᵀ``,
        with ``Ȧ`` from the relaxation ``Ż = −λ(Z − βŜ)`` at ``(Z, A)`` (``Ŝ = S_hat``)."""
        Z_dot = (Z - self.beta * S_hat) * -self.relaxation_rate
        A_dot = A * (Z_dot - np.vecdot(A, Z_dot)[:, None])
        Y = X @ self.W_V.T
        O = A @ Y
        O_dot = A_dot @ Y + A @ (X_dot @ self.W_V.T)
        G = X @ self.M + self.kappa * ((X - O) @ self.W_V)
        G_dot = X_dot @ self.M + self.kappa * ((X_dot - O_dot) @ self.W_V)
        return G_dot @ X.T + G @ X_dot.T


def _energy(prob, state, log_a=None, S=None):
    return hamiltonian(prob, state.X, state.P, state.A, log_a,
                       diagnostics.scores_of(prob, state) if S is None else S)


def _kinetic(prob, state):
    return kinetic_energy(prob, state.X, state.P, state.A)


def _effective(prob, state, S):
    return effective_scores(prob, state.X, state.P, state.A, S)


def _build(values, given):
    return part_one.build(values, given, problem_type=ValueMatchingProblem, free_motion=False)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=_energy, kinetic=_kinetic,
                                effective_scores=_effective, not_applicable=("kl_bound",), **subset)


def _reference(prob, state):
    return coupled_reference(prob, state, feature_velocity, momentum_force, effective_scores)


SPEC = register(ModelSpec(
    name="value_matching", part=1, title="Value matching", section="value_matching",
    settings=("gamma", "logit_noise", "mass", "kappa", "confinement", "init_attention",
              "init_momentum"),
    continue_settings=("dt", "gamma", "logit_noise"),
    energy_settings=("beta", "mass", "kappa", "confinement"),
    equations=r"""
<p><b>Value matching</b>: $O = A X W_V^\top$, $R = X - O$,
$H = \frac{\|P\|^2}{2m} + F(A;X) + \frac{\kappa}{2}\|R\|^2 + \frac{k}{2}\|X\|^2$,
$$\dot X = P/m,\quad \dot P = f(A,X) - \kappa\,(R - A^\top R W_V) - kX,\quad
C^H = C - \kappa R W_V X^\top.$$
The attention target is $\mathrm{rowsoftmax}(\beta\hat S)$, $\hat S = S + \kappa R W_V X^\top$
(the tracking bound is n/a). Law: $dH/dt = -D \le 0$.</p>""",
    look_for="Attention chases a target that moves with it; H only decreases.",
    build=_build, reproblem=part_one.same_state,
    stepper=EtdVerlet, energy=_energy, diagnostics=_diagnostics,
    not_applicable=("kl_bound",),
    readable={"reference": _reference, "velocity": feature_velocity, "force": momentum_force,
           "effective_scores": effective_scores, "hamiltonian": hamiltonian},
))
