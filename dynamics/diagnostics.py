"""The diagnostics every frame reports, computed in one place from (model, problem, state).

:func:`part_one` serves the nonequilibrium-attention models (energies, lag, tracking bound,
balance), :func:`part_two` the inertial lab's (second moments, energies, norms). Each
model's spec passes in what is its own (its energy, effective scores, momentum term).
"""

from __future__ import annotations

import math

import numpy as np

from . import energy as en
from .inertial.clouds import second_moment
from .inertial.softmax import softmax_kernel

#: Every Part I diagnostic, in the order of the trajectory table.
PART_ONE = (
    "t", "free_energy", "potential", "hamiltonian", "kinetic_energy",
    "dissipation_rate", "dissipated", "work", "noise_work", "kl", "kl_target", "kl_bound",
    "energy_residual", "entropy_mean", "min_attention", "row_sum_error",
    "feature_norm", "momentum_energy",
)
#: Every Part II diagnostic, in the order of the trajectory table.
PART_TWO = (
    "t", "second_moment_max", "second_moment_min", "hamiltonian", "kinetic_energy",
    "dissipation_rate", "feature_norm", "momentum_norm", "damping",
)

def scores_of(prob, state):
    """``S(X)`` of a state (computed when the step left it out)."""
    return state.S if state.S is not None else en.scores(state.X, prob.M)


def part_one(prob, state, energy0, *, energy, effective_scores=None, kinetic=None,
                slaved=False, attention_only=False, not_applicable=(), momentum=None):
    """Every scalar diagnostic of a Part I state, and the arrays of its frame.

    Parameters
    ----------
    prob : Problem
    state : State
    energy0 : float
        ``E(0)`` of the run (the energy balance's origin).
    energy : callable ``(prob, state, log_a, S) -> float``
        The model's ``E`` (``F``, ``H``, ``H_r`` or ``Φ``).
    effective_scores : callable ``(prob, state, S) -> ndarray``, optional
        ``Ŝ`` when the attention target is not ``A*``.
    kinetic : callable ``(prob, state) -> float``, optional
        The kinetic energy ``‖P‖²/(2m)`` of ``H`` (0 when None).
    slaved : bool
        Attention is ``A*(X)`` (no dissipation).
    attention_only : bool
        The features follow a prescribed path: ``E = F``.
    not_applicable : tuple of str
        Diagnostics reported as NaN.
    momentum : callable ``(prob, state) -> float``, optional
        ``momentum_energy``, the momentum term of ``H`` when it is not a kinetic energy
        (the cotangent lift's ``⟨P, A X W_Vᵀ⟩``); else the kinetic energy.

    Returns
    -------
    diag : dict of str to float
    arrays : dict
        ``softmax``, ``target`` (ndarray, shape (N, N)) and ``kl_rows`` (shape (N,)).
    """
    st, beta = state, prob.beta
    S = scores_of(prob, st)
    log_a = en.log_rowsoftmax(st.Z)
    lse_star = en.row_logsumexp(beta * S)
    log_star = beta * S - lse_star
    S_hat = S if effective_scores is None else effective_scores(prob, st, S)
    log_target = log_star if S_hat is S else en.log_rowsoftmax(beta * S_hat)
    kl_rows = en.kl_rows(log_a, log_star, st.A)
    F = en.free_energy(st.A, S, beta, log_a)
    E = F if attention_only else energy(prob, st, log_a, S)
    costs = en.marginal_costs(log_a, S_hat, beta)
    diag = {
        "t": st.t,
        "free_energy": F,
        "potential": float(-np.sum(lse_star) / beta),
        "hamiltonian": E,
        "kinetic_energy": 0.0 if kinetic is None else kinetic(prob, st),
        "dissipation_rate": 0.0 if slaved else en.dissipation_rate(st.A, costs, prob.gamma),
        "dissipated": st.dissipated,
        "work": st.work,
        "noise_work": st.noise_work,
        "kl": float(kl_rows.sum()),
        "kl_target": float(kl_rows.sum()) if log_target is log_star
        else float(en.kl_rows(log_a, log_target, st.A).sum()),
        "kl_bound": float(np.sum(st.B**2) / 8.0),
        "energy_residual": (E - energy0 - st.work + st.dissipated),
        "entropy_mean": float(np.mean(en.entropy_rows(st.A, log_a))),
        "min_attention": float(st.A.min()),
        "row_sum_error": float(np.max(np.abs(st.A.sum(axis=1) - 1.0))),
        "feature_norm": float(np.sqrt(np.sum(st.X * st.X))),
    }
    diag["momentum_energy"] = diag["kinetic_energy"] if momentum is None \
        else momentum(prob, st)
    for name in not_applicable:
        diag[name] = math.nan
    softmax = np.exp(log_star)
    arrays = {"attention": st.A.copy(), "softmax": softmax,
              "target": softmax if log_target is log_star else np.exp(log_target),
              "kl_rows": kl_rows}
    return diag, arrays


def measure(problem, X: np.ndarray, Y: np.ndarray):
    """``(‖X‖, λ_max(S), λ_min(S), H, kinetic, Σ y·∂H/∂y, watched)`` at ``(X, Y)``
    (``watched``: the norm of :meth:`Problem.measures`, ``inf`` past the largest float),
    or None if any other is not finite (``S = XᵀX/N``; ``X``, ``Y`` of shape (N, d))."""
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
        return None
    with np.errstate(all="ignore"):
        S = second_moment(X)
        if not np.all(np.isfinite(S)):
            return None
        lam = np.linalg.eigvalsh(S)
        vals = (float(np.linalg.norm(X)), float(lam[-1]), float(lam[0]),
                *problem.measures(X, Y))
    return vals if all(math.isfinite(v) for v in vals[:6]) else None


def momentum_norm(Y: np.ndarray) -> float:
    """``‖Y‖`` (Frobenius; scaled by the largest entry when the plain sum of squares
    overflows; ``inf`` only past the largest float), ``Y`` of shape (N, d)."""
    with np.errstate(all="ignore"):
        norm = float(np.linalg.norm(Y))
        if math.isinf(norm) and np.all(np.isfinite(Y)):
            top = float(np.max(np.abs(Y)))
            norm = top * float(np.linalg.norm(Y / top))
        return norm


def part_two(problem, state, energy0: float):
    """Every scalar diagnostic of a Part II state, and the arrays of its frame.

    ``hamiltonian`` and ``kinetic_energy`` are 0 for the first-order models; the
    momentum-only control reports ``kinetic_energy = ½‖Y‖²`` and no ``H``;
    ``dissipation_rate`` is ``α(t) Σ_i y_i·∂H/∂y_i`` for the second-order models.

    Parameters
    ----------
    problem : Problem
    state : State
    energy0 : float
        Unused (Part II keeps no energy balance).

    Returns
    -------
    diag : dict of str to float
        The keys of :data:`PART_TWO`.
    arrays : dict
        ``attention``: the softmax kernel weights ``rowsoftmax(x_iᵀ A x_j)``, shape
        (N, N), for the softmax models.
    """
    X, Y = state.X, state.P
    vals = measure(problem, X, Y)
    if vals is None:  # an accepted state is finite; be safe
        vals = (0.0,) * 7
    norm, lmax, lmin, H, kinetic, dissipation, _ = vals
    alpha = float(problem.damping.rate(state.t))
    diag = {
        "t": float(state.t),
        "second_moment_max": lmax,
        "second_moment_min": lmin,
        "hamiltonian": H,
        "kinetic_energy": kinetic,
        "dissipation_rate": alpha * dissipation if problem.second_order else 0.0,
        "feature_norm": norm,
        "momentum_norm": momentum_norm(Y),
        "damping": alpha,
    }
    arrays = {}
    if problem.softmax:
        with np.errstate(under="ignore"):
            arrays["attention"] = softmax_kernel(X, problem.A)
    return diag, arrays
