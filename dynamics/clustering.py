"""Tokens on the unit sphere: projection, interaction energy and clusters (Theory page:
"Tokens on the sphere").

Pure functions over whole arrays (rows are tokens ``x_i``), no loop over tokens. They
serve the normalised Transformer flow (:mod:`dynamics.models.sphere`), its tests and the
app's clustering view.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import expm
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

#: Largest β at which ``E_β = (1/2β) Σ_ij e^{β⟨x_i, x_j⟩}`` (of order ``e^β``) and the
#: unnormalised kernel ``e^{β x_iᵀ M x_j}`` stay finite in double precision with room.
BETA_MAX = 700.0
_LOG_MAX = math.log(np.finfo(float).max)


def unit_rows(X):
    """``x_i / ‖x_i‖`` for every row, shape (N, d) → (N, d).

    Raises
    ------
    ValueError
        A row is zero (it has no direction) or not finite.
    """
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise ValueError("features must be finite with no zero row to be put on the sphere")
    return X / norms


def tangent_part(X, V):
    """``P_{x_i} v_i = v_i − ⟨x_i, v_i⟩ x_i`` row by row, shape (N, d): the part of ``v_i``
    tangent to the sphere at a unit ``x_i`` (``P_x = I − x xᵀ``)."""
    return V - np.einsum("ij,ij->i", X, V)[:, None] * X


def similarity(X):
    """Gram matrix ``⟨x_i, x_j⟩``, shape (N, d) → (N, N) (cosines for unit rows)."""
    return X @ X.T


def interaction_energy(X, beta):
    """``E_β = (1/2β) Σ_ij e^{β⟨x_i, x_j⟩}`` for unit rows ``X`` (N, d).

    Evaluated as ``e^β/(2β) Σ_ij e^{β(⟨x_i, x_j⟩ − 1)}``: every exponent is ≤ 0 up to
    rounding, so nothing overflows for ``β ≤ BETA_MAX``; ``inf`` when ``E_β`` exceeds
    the largest float (β above about 709).
    """
    G = np.minimum(similarity(X), 1.0)
    with np.errstate(under="ignore"):
        total = float(np.exp(beta * (G - 1.0)).sum())
    log_energy = beta + math.log(total) - math.log(2.0 * beta)
    return math.exp(log_energy) if log_energy < _LOG_MAX else math.inf


def max_interaction_energy(n_tokens, beta):
    """``N² e^β / (2β)``: ``E_β`` when all tokens coincide (its maximum)."""
    return n_tokens**2 * math.exp(beta) / (2.0 * beta)


def energy_rate(X, X_dot, beta, kernel="softmax"):
    """``dE_β/dt`` along the flow with ``M = W_V = I``: ``Σ_i z_i ‖ẋ_i‖²`` with
    ``z_i = Σ_j e^{β⟨x_i, x_j⟩}`` (softmax kernel) or ``N Σ_i ‖ẋ_i‖²`` (unnormalised).

    Parameters
    ----------
    X, X_dot : ndarray, shape (N, d)
        Unit tokens and their velocities.
    beta : float
    kernel : {"softmax", "unnormalised"}
    """
    speed2 = np.einsum("ij,ij->i", X_dot, X_dot)
    if kernel == "unnormalised":
        return float(X.shape[0] * speed2.sum())
    z = np.exp(beta * similarity(X)).sum(axis=1)
    return float(z @ speed2)


def cluster_labels(X, eps):
    """Clusters of tokens: connected groups in the graph ``cos(x_i, x_j) > 1 − ε``.

    Parameters
    ----------
    X : ndarray, shape (N, d)
        Tokens (the cosine is ``⟨x_i, x_j⟩`` for unit rows).
    eps : float
        ε > 0.

    Returns
    -------
    count : int
    labels : ndarray of int, shape (N,)
        The cluster of each token, numbered from 0.
    """
    return clusters_of_similarity(similarity(unit_rows(X)), eps)


def clusters_of_similarity(G, eps):
    """:func:`cluster_labels` from the cosines ``G`` (N, N) of the tokens."""
    count, labels = connected_components(csr_matrix(G > 1.0 - eps), directed=False)
    return int(count), labels


def min_similarity(X):
    """``min_ij ⟨x_i, x_j⟩`` (1 when all unit tokens coincide)."""
    return float(similarity(X).min())


def rescaled(X, W_V, t):
    """``z_i = e^{−t W_V} x_i`` row by row, shape (N, d): the frame in which the
    unnormalised flow ``Ẋ = A*(X) X W_Vᵀ`` shows its clusters."""
    return X @ expm(-t * np.asarray(W_V, dtype=float)).T


__all__ = [
    "BETA_MAX", "cluster_labels", "clusters_of_similarity", "energy_rate", "interaction_energy",
    "max_interaction_energy", "min_similarity", "rescaled", "similarity", "tangent_part",
    "unit_rows",
]
