"""Scores, softmax attention and the free energy (Theory page: scores, softmax, free energy).

Every function works on whole matrices (rows are receiving tokens ``i``, columns
source tokens ``j``) with no Python loop over tokens. Logarithms of attention are
taken from logits, never from ``A`` itself, so nothing underflows to ``log 0``.
"""

from __future__ import annotations

import numpy as np

# The ufunc reductions themselves, for the per-step paths: the ndarray methods and np.sum
# add a Python wrapper (same values).
max_reduce, min_reduce, sum_reduce = np.maximum.reduce, np.minimum.reduce, np.add.reduce


def scores(X, M):
    """Query-key scores ``S = X M Xᵀ``.

    Parameters
    ----------
    X : ndarray, shape (N, d)
    M : ndarray, shape (d, d)

    Returns
    -------
    ndarray, shape (N, N)
    """
    return (X @ M) @ X.T


def row_logsumexp(Z):
    """``log Σ_j exp(Z_ij)`` per row with max-subtraction, shape (N, N) → (N, 1)."""
    m = Z.max(axis=1, keepdims=True)
    return m + np.log(np.exp(Z - m).sum(axis=1, keepdims=True))


def log_rowsoftmax(Z):
    """Row-wise log-softmax of logits, shape (N, N) → (N, N)."""
    Z = np.asarray(Z, dtype=float)
    return Z - row_logsumexp(Z)


def rowsoftmax(Z, centred=False, out=None):
    """Row-wise softmax with max-subtraction, shape (N, N) → (N, N).

    ``centred=True`` promises that every row maximum of ``Z`` is already 0 (as the
    integrators keep their logits) and skips the subtraction. ``out`` (may be ``Z``
    itself) receives the result; a new array otherwise.
    """
    if centred:
        E = np.exp(Z, out=out)
    else:
        E = np.subtract(Z, max_reduce(Z, 1, keepdims=True), out=out)
        np.exp(E, out=E)
    E *= np.divide(1.0, sum_reduce(E, 1))[:, None]  # one division per row, not per entry
    return E


def softmax_attention(S, beta):
    """Softmax attention ``A* = rowsoftmax(βS)``."""
    return rowsoftmax(beta * S)


def entropy_rows(A, log_a=None):
    """Row entropies ``−Σ_j A_ij log A_ij``, shape (N,)."""
    log_a = np.log(A) if log_a is None else log_a
    return -np.sum(A * log_a, axis=1)


def free_energy(A, S, beta, log_a=None):
    """Free energy ``F(A; X) = Σ_i [−Σ_j A_ij S_ij + (1/β) Σ_j A_ij log A_ij]``.

    Parameters
    ----------
    A : ndarray, shape (N, N)
        Row-stochastic, strictly positive attention.
    S : ndarray, shape (N, N)
        Scores.
    beta : float
    log_a : ndarray, shape (N, N), optional
        ``log A`` (pass it when known from logits).
    """
    return float(-np.sum(A * S) - np.sum(entropy_rows(A, log_a)) / beta)


def potential(S, beta):
    """Log-sum-exp potential ``Φ = −(1/β) Σ_i logsumexp_j(βS_ij)`` = min of F."""
    return float(-np.sum(row_logsumexp(beta * S)) / beta)


def kl_rows(log_p, log_q, P=None):
    """``KL(P_i ‖ Q_i)`` per row from log-probabilities, shape (N,); clipped at 0.

    ``P = exp(log_p)`` may be passed when already known.
    """
    P = np.exp(log_p) if P is None else P
    return np.maximum(np.einsum("ij,ij->i", P, log_p - log_q), 0.0)


def marginal_costs(log_a, S, beta):
    """Marginal costs ``C = ∂F/∂A = −S + (1/β)(1 + log A)``, shape (N, N)."""
    return -S + (1.0 + log_a) / beta


def row_centred(C, A):
    """``C_ij − C̄_i`` with ``C̄_i = Σ_k A_ik C_ik``."""
    return C - np.sum(A * C, axis=1, keepdims=True)


def fisher_rao_velocity(A, C, gamma):
    """Attention flow ``dA/dt = −γ A ⊙ (C − C̄)``, shape (N, N)."""
    return -gamma * A * row_centred(C, A)


def dissipation_rate(A, C, gamma):
    """``D = γ Σ_i Σ_j A_ij (C_ij − C̄_i)² ≥ 0``."""
    return float(gamma * np.sum(A * row_centred(C, A) ** 2))


def row_variance(A, W, work=None):
    """``Σ_i Var_{A_i}(W_i)``: summed row variances of ``W`` under ``A``.

    ``work`` (an array shaped like ``W``, not ``W`` or ``A``) holds the centred
    values; a new array otherwise.
    """
    Wc = np.subtract(W, np.vecdot(A, W)[:, None], out=work)
    np.multiply(Wc, Wc, out=Wc)
    return float(np.vdot(A, Wc))


def oscillation(V):
    """Row oscillation ``osc(v) = max_j v_j − min_j v_j`` over the last axis, shape
    (N, N) → (N,) (or a stack of such matrices, (k, N, N) → (k, N))."""
    return max_reduce(V, -1) - min_reduce(V, -1)
