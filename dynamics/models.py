"""The coupled Hamiltonian models and the reference models (MODEL.md §7-§8).

A model is its vector field and its energy. With attention ``A`` held as a
parameter, features follow Hamilton's equations of ``H``; attention follows the
Fisher-Rao flow of the same ``H``, i.e. logits ``dZ/dt = γŜ − λZ`` with the
effective scores ``Ŝ = S − (C^H − C)`` returned by :func:`effective_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .energy import free_energy, potential, scores, softmax_attention

HAMILTONIAN_MODELS = ("canonical", "value_matching", "cotangent_lift")


@dataclass(frozen=True)
class Problem:
    """The fixed data of a simulation.

    Attributes
    ----------
    M : ndarray, shape (d, d)
        Query-key interaction (not symmetric).
    W_V : ndarray, shape (d, d)
        Value map.
    beta, gamma, mass, kappa, confinement : float
        β, γ, m, κ and k of MODEL.md §7.
    """

    M: np.ndarray
    W_V: np.ndarray
    beta: float
    gamma: float
    mass: float = 1.0
    kappa: float = 0.0
    confinement: float = 0.0

    @property
    def relaxation_rate(self) -> float:
        """λ = γ/β."""
        return self.gamma / self.beta


def feature_force(A, X, M):
    """``f(A, X) = −∇_X F(A; X) = A X Mᵀ + Aᵀ X M`` (§7), shape (N, d)."""
    return A @ (X @ M.T) + A.T @ (X @ M)


def value_residual(A, X, W_V):
    """``R = X − A X W_Vᵀ`` of the value-matching model (§7b), shape (N, d)."""
    return X - A @ (X @ W_V.T)


def effective_scores(model, prob, X, P, A, S=None):
    """Effective scores ``Ŝ = S − (C^H − C)`` of ``model`` (§7), shape (N, N)."""
    S = scores(X, prob.M) if S is None else S
    if model == "canonical":
        return S
    if model == "value_matching":
        R = value_residual(A, X, prob.W_V)
        return S + prob.kappa * (R @ prob.W_V) @ X.T
    if model == "cotangent_lift":
        return S - (P @ prob.W_V) @ X.T
    raise ValueError(f"{model!r} has no effective scores")


def feature_velocity(model, prob, X, P, A):
    """``Ẋ = ∂H/∂P`` (§7), shape (N, d)."""
    if model == "cotangent_lift":
        return A @ (X @ prob.W_V.T)
    return P / prob.mass


def momentum_force(model, prob, X, P, A):
    """``Ṗ = −∂H/∂X`` including the confining force ``−kX`` (§7), shape (N, d)."""
    force = feature_force(A, X, prob.M) - prob.confinement * X
    if model == "value_matching":
        R = value_residual(A, X, prob.W_V)
        force -= prob.kappa * (R - A.T @ (R @ prob.W_V))
    elif model == "cotangent_lift":
        force -= A.T @ (P @ prob.W_V)
    return force


def kinetic_energy(model, prob, X, P, A):
    """The momentum part of ``H``: ``‖P‖²/(2m)``, or ``⟨P, A X W_Vᵀ⟩`` (cotangent lift)."""
    if model == "cotangent_lift":
        return float(np.sum(P * (A @ (X @ prob.W_V.T))))
    return float(np.sum(P * P) / (2.0 * prob.mass))


def confinement_energy(prob, X):
    """``(k/2)‖X‖²``."""
    return 0.5 * prob.confinement * float(np.sum(X * X))


def hamiltonian(model, prob, X, P, A, log_a=None, S=None):
    """Total energy ``H`` of a coupled model (§7) or ``H_r`` of the reduced model (§8)."""
    S = scores(X, prob.M) if S is None else S
    H = kinetic_energy(model, prob, X, P, A) + confinement_energy(prob, X)
    if model == "reduced":
        return H + potential(S, prob.beta)
    H += free_energy(A, S, prob.beta, log_a)
    if model == "value_matching":
        R = value_residual(A, X, prob.W_V)
        H += 0.5 * prob.kappa * float(np.sum(R * R))
    return H


def reduced_force(prob, X):
    """Force of the reduced model ``f(A*(X), X) − kX`` (envelope theorem, §8)."""
    A_star = softmax_attention(scores(X, prob.M), prob.beta)
    return feature_force(A_star, X, prob.M) - prob.confinement * X


def transformer_velocity(prob, X):
    """First-order Transformer flow ``Ẋ = A*(X) X W_Vᵀ`` (§8), shape (N, d)."""
    A_star = softmax_attention(scores(X, prob.M), prob.beta)
    return A_star @ (X @ prob.W_V.T)


def residual_layer(prob, X, h):
    """One residual attention layer ``X + h A*(X) X W_Vᵀ`` (explicit Euler, §8)."""
    return X + h * transformer_velocity(prob, X)
