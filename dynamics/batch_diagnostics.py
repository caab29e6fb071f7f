"""The diagnostics a sweep reads, computed on a batch's stacks
(:class:`~dynamics.batch.CanonicalBatch`): one NumPy call per operation for every run still
running, each value bit-identical to :func:`~dynamics.diagnostics.part_one` of that run
alone (the same expressions; row reductions over the last, contiguous axis, as the batch
steps). Other diagnostics are reported through each run's engine.
"""

from __future__ import annotations

import numpy as np

from .frame import Frame

#: Diagnostics computed on the stacks (``t``, the lag ``kl``, its bound, the balance's terms,
#: the Hamiltonian and the energy residual ``H − H(0) − work + ∫D``).
STACKED = frozenset({"t", "kl", "kl_bound", "dissipated", "work", "hamiltonian",
                     "energy_residual"})


def stacked_frames(batch, names):
    """The frames of the rows of ``batch`` now, as ``k -> Frame`` (row ``k``), with the
    diagnostics ``names`` (a subset of :data:`STACKED`) and the states a trajectory
    records; ``names`` None or beyond :data:`STACKED`: None (each run reports alone).

    ``kl = Σ_i KL(A_i‖A*_i)``, ``log A* = βS − logsumexp(βS)``, ``log A`` from the logits;
    ``kl_bound = Σ_i B_i²/8`` (:func:`~dynamics.diagnostics.part_one`);
    ``hamiltonian = ‖P‖²/(2m) + (k/2)‖X‖² + F(A; X)`` (the canonical model's ``H``, each
    sum over a whole matrix taken over its flattened rows, as NumPy sums the matrix).
    """
    if names is None or not names <= STACKED:
        return None
    X, P, A = batch.X.copy(), batch.P.copy(), batch.A.copy()
    columns = {}
    energy = bool({"hamiltonian", "energy_residual"} & names)
    if "kl" in names or energy:
        Z = batch.Z
        log_a = Z - _row_logsumexp(Z)
    if energy:
        H = _hamiltonian(batch, log_a)
        columns["hamiltonian"] = H
        energy0 = np.array([batch.sims[i]._energy0 for i in batch.rows])
        columns["energy_residual"] = H - energy0 - batch.work + batch.dissipated
    if "kl" in names:
        S = batch.S
        beta_S = batch.beta[:, None, None] * S
        log_star = beta_S - _row_logsumexp(beta_S)
        kl_rows = np.maximum(np.einsum("kij,kij->ki", A, log_a - log_star), 0.0)
        columns["kl"] = kl_rows.sum(axis=-1)
    if "kl_bound" in names:
        columns["kl_bound"] = np.sum(batch.Bound**2, axis=-1) / 8.0
    if "dissipated" in names:
        columns["dissipated"] = batch.dissipated
    if "work" in names:
        columns["work"] = batch.work
    order = [n for n in ("t", "hamiltonian", "dissipated", "work", "kl", "kl_bound",
                         "energy_residual") if n in names]
    t = batch.t

    def frame(k):
        diag = {n: t if n == "t" else float(columns[n][k]) for n in order}
        return Frame(t=t, features=X[k], momenta=P[k], attention=A[k], diagnostics=diag)

    return frame


def stacked_balance(batch):
    """``(energy_residual, momentum_energy)`` of every row of ``batch`` now: what
    :class:`~dynamics.divergence.LawWatch` reads besides ``∫D`` and ``W``, each as a run
    computes it (``momentum_energy`` is the canonical model's kinetic energy
    ``‖P‖²/(2m)``)."""
    Z = batch.Z
    H = _hamiltonian(batch, Z - _row_logsumexp(Z))
    energy0 = np.array([batch.sims[i]._energy0 for i in batch.rows])
    kinetic = _flat_sum(batch.P * batch.P) / (2.0 * batch.mass)
    return H - energy0 - batch.work + batch.dissipated, kinetic


def _row_logsumexp(Z):
    """``energy.row_logsumexp`` of each matrix of a stack, shape (R, N, 1)."""
    m = Z.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(Z - m).sum(axis=-1, keepdims=True))


def _flat_sum(x):
    """``np.sum`` of each matrix of a stack, as NumPy sums one matrix (its flattened
    elements in order)."""
    return np.sum(x.reshape(len(x), -1), axis=-1)


def _hamiltonian(batch, log_a):
    """``H`` of every row, as :func:`~dynamics.models.canonical.hamiltonian` computes it:
    ``(‖P‖²/(2m) + (k/2)‖X‖²) + F``, ``F = −Σ A S − Σ_i (−Σ_j A log A)/β``."""
    X, P, A, S = batch.X, batch.P, batch.A, batch.S
    kinetic = _flat_sum(P * P) / (2.0 * batch.mass)
    confinement = 0.5 * batch.confinement * _flat_sum(X * X)
    entropy = -np.sum(A * log_a, axis=-1)
    free = -_flat_sum(A * S) - np.sum(entropy, axis=-1) / batch.beta
    return kinetic + confinement + free
