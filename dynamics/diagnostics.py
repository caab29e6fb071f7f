"""The diagnostics every frame reports, computed in one place from (model, problem, state).

:func:`part_one` serves the nonequilibrium-attention models (energies, lag, tracking bound,
balance), :func:`part_two` the inertial lab's (second moments, energies, norms). Each
model's spec passes in what is its own (its energy, effective scores, momentum term).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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
_EVERY_PART_ONE = frozenset(PART_ONE)
#: The Part II diagnostics that read :func:`measure` (the moments and energies).
_MEASURED = frozenset(PART_TWO[1:7])


def scores_of(prob, state):
    """``S(X)`` of a state (computed when the step left it out)."""
    return state.S if state.S is not None else en.scores(state.X, prob.M)


def wanted(diagnostics) -> frozenset | None:
    """The diagnostic names a run asks for: None for every one (``True``), ``t`` alone
    (``False``), or ``t`` and the names of a collection (e.g. ``("kl",)``).

    Raises
    ------
    ValueError
        For anything else (a bare string included: write ``("kl",)``).
    """
    if diagnostics is True:
        return None
    if diagnostics is False:
        return frozenset(("t",))
    if isinstance(diagnostics, str | bytes) or not isinstance(diagnostics, Iterable):
        raise ValueError("diagnostics must be True, False or a collection of diagnostic "
                         f"names such as ('kl',), got {diagnostics!r}")
    names = frozenset(diagnostics)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"diagnostic names must be strings, got {sorted(map(repr, names))}")
    return names | {"t"}


def select(diag: dict, arrays: dict, names=None, keep_arrays: bool = True):
    """``(diag, arrays)`` of a full computation cut down to ``names`` (None: all) and, without
    ``keep_arrays``, to the ``attention`` a trajectory records: for diagnostics functions
    that compute everything (the values are theirs, untouched)."""
    if names is not None:
        diag = {k: v for k, v in diag.items() if k in names}
    if not keep_arrays:
        arrays = {k: v for k, v in arrays.items() if k == "attention"}
    return diag, arrays


def of_model(spec, problem, state, energy0: float, names=None, arrays: bool = True):
    """``(diag, arrays)`` of ``state`` by its model's ``spec``: every diagnostic, or only
    ``names`` (those the model reports, see :func:`wanted`); without ``arrays`` the
    ``attention`` alone among the arrays. A model whose diagnostics cannot compute a subset
    (``spec.subset_diagnostics`` false) computes them all and :func:`select` keeps what
    was asked for."""
    if names is None and arrays:
        return spec.diagnostics(problem, state, energy0)
    if spec.subset_diagnostics:
        return spec.diagnostics(problem, state, energy0, names=names, arrays=arrays)
    return select(*spec.diagnostics(problem, state, energy0), names, arrays)


def part_one(prob, state, energy0, *, energy, effective_scores=None, kinetic=None,
             slaved=False, attention_only=False, not_applicable=(), momentum=None,
             names=None, arrays=True):
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
    names : collection of str, optional
        Only these diagnostics (None: all of :data:`PART_ONE`), and only what they read is
        computed (the scores, ``log A``, ``log A*``, ``F``, ``E`` …, each once): each value
        is bit-identical to the full computation's, the same expression on the same
        operands.
    arrays : bool
        False: the frame's ``attention`` only (no ``softmax``, ``target``, ``kl_rows``).

    Returns
    -------
    diag : dict of str to float
        In the order of :data:`PART_ONE`.
    arrays : dict
        ``attention``, ``softmax``, ``target`` (ndarray, shape (N, N)) and ``kl_rows``
        (shape (N,)).
    """
    st, beta = state, prob.beta
    want = _EVERY_PART_ONE if names is None else frozenset(names)
    # what the diagnostics asked for read (each computed once, as the full run computes it)
    energy_read = "hamiltonian" in want or "energy_residual" in want
    model_energy_read = energy_read and not attention_only
    free_read = "free_energy" in want or (energy_read and attention_only)
    costs_read = "dissipation_rate" in want and not slaved
    target_read = arrays or "kl_target" in want                    # log_target
    kl_read = target_read or "kl" in want                          # kl_rows
    star_read = kl_read or "potential" in want                     # lse_star, log_star
    log_a_read = kl_read or free_read or costs_read or model_energy_read \
        or "entropy_mean" in want
    kinetic_read = "kinetic_energy" in want or ("momentum_energy" in want and momentum is None)
    if star_read or free_read or costs_read or model_energy_read:
        S = scores_of(prob, st)
    if log_a_read:
        log_a = en.log_rowsoftmax(st.Z)
    if star_read:
        lse_star = en.row_logsumexp(beta * S)
        log_star = beta * S - lse_star
    if target_read or costs_read:
        S_hat = S if effective_scores is None else effective_scores(prob, st, S)
    if target_read:
        log_target = log_star if S_hat is S else en.log_rowsoftmax(beta * S_hat)
    if kl_read:
        kl_rows = en.kl_rows(log_a, log_star, st.A)
    if free_read:
        F = en.free_energy(st.A, S, beta, log_a)
    if energy_read:
        E = F if attention_only else energy(prob, st, log_a, S)
    if kinetic_read:
        kinetic_energy = 0.0 if kinetic is None else kinetic(prob, st)
    diag = {}  # (in the order of PART_ONE)
    if "t" in want:
        diag["t"] = st.t
    if "free_energy" in want:
        diag["free_energy"] = F
    if "potential" in want:
        diag["potential"] = float(-np.sum(lse_star) / beta)
    if "hamiltonian" in want:
        diag["hamiltonian"] = E
    if "kinetic_energy" in want:
        diag["kinetic_energy"] = kinetic_energy
    if "dissipation_rate" in want:
        diag["dissipation_rate"] = 0.0 if slaved else en.dissipation_rate(
            st.A, en.marginal_costs(log_a, S_hat, beta), prob.gamma)
    if "dissipated" in want:
        diag["dissipated"] = st.dissipated
    if "work" in want:
        diag["work"] = st.work
    if "noise_work" in want:
        diag["noise_work"] = st.noise_work
    if "kl" in want:
        diag["kl"] = float(kl_rows.sum())
    if "kl_target" in want:
        diag["kl_target"] = float(kl_rows.sum()) if log_target is log_star \
            else float(en.kl_rows(log_a, log_target, st.A).sum())
    if "kl_bound" in want:
        diag["kl_bound"] = float(np.sum(st.B**2) / 8.0)
    if "energy_residual" in want:
        diag["energy_residual"] = (E - energy0 - st.work + st.dissipated)
    if "entropy_mean" in want:
        diag["entropy_mean"] = float(np.mean(en.entropy_rows(st.A, log_a)))
    if "min_attention" in want:
        diag["min_attention"] = float(st.A.min())
    if "row_sum_error" in want:
        diag["row_sum_error"] = float(np.max(np.abs(st.A.sum(axis=1) - 1.0)))
    if "feature_norm" in want:
        diag["feature_norm"] = float(np.sqrt(np.sum(st.X * st.X)))
    if "momentum_energy" in want:
        diag["momentum_energy"] = kinetic_energy if momentum is None else momentum(prob, st)
    for name in not_applicable:
        if name in diag:
            diag[name] = math.nan
    frame = {"attention": st.A.copy()}
    if arrays:
        softmax = np.exp(log_star)
        frame.update(softmax=softmax,
                     target=softmax if log_target is log_star else np.exp(log_target),
                     kl_rows=kl_rows)
    return diag, frame


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


def part_two(problem, state, energy0: float, *, names=None, arrays=True):
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
    names : collection of str, optional
        Only these diagnostics (None: all of :data:`PART_TWO`); the moments and energies
        are computed only when one of them is asked for, each as the full computation.
    arrays : bool
        Unused: the frame's one array is the ``attention`` a trajectory records.

    Returns
    -------
    diag : dict of str to float
        The keys of :data:`PART_TWO` (those of ``names``).
    arrays : dict
        ``attention``: the softmax kernel weights ``rowsoftmax(x_iᵀ A x_j)``, shape
        (N, N), for the softmax models.
    """
    X, Y = state.X, state.P
    names = None if names is None else frozenset(names)
    if names is not None and not (names & _MEASURED or "momentum_norm" in names):
        diag = {"t": float(state.t)} if "t" in names else {}
        if "damping" in names:
            diag["damping"] = float(problem.damping.rate(state.t))
    else:
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
        if names is not None:
            diag = {k: v for k, v in diag.items() if k in names}
    arrays = {}
    if problem.softmax:
        with np.errstate(under="ignore"):
            arrays["attention"] = softmax_kernel(X, problem.A)
    return diag, arrays
