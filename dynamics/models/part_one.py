"""What the Part I models share: their fixed data, their initial state, the feature force
of the free energy, and the diagnostics every frame reports (Theory page, Part I).

A model of Part I is its energy and its vector field; this module holds the pieces
that several of them use, written as on the Theory page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import energy as en
from .. import real_heads
from ..diagnostics import scores_of
from ..initial import draw_initial_data
from ..logits import centre_rows, score_rate
from ..paths import FeaturePath
from ..state import State

#: Settings of the prescribed feature paths.
PATH_SETTINGS = ("path", "omega", "amplitude", "switch_time", "settle_rate")


@dataclass(frozen=True)
class Problem:
    """The fixed data of a Part I run.

    Attributes
    ----------
    M : ndarray, shape (d, d)
        Query-key interaction (not symmetric).
    W_V : ndarray, shape (d, d)
        Value map.
    beta, gamma, mass, kappa, confinement : float
        β, γ, m, κ and k.
    path : FeaturePath or None
        The prescribed feature path (attention-only model).
    tokens : tuple of str
        The tokens' words (a real sentence), or empty.
    fixed : int
        How many trailing feature coordinates are held fixed, with no force and no
        momentum (1 for a real head: its constant feature column, Theory page "A real
        head on a real sentence").
    """

    M: np.ndarray
    W_V: np.ndarray
    beta: float
    gamma: float
    mass: float = 1.0
    kappa: float = 0.0
    confinement: float = 0.0
    path: FeaturePath | None = None
    tokens: tuple = ()
    fixed: int = 0

    @property
    def relaxation_rate(self) -> float:
        """λ = γ/β."""
        return self.gamma / self.beta

    def with_values(self, values: dict):
        """The same problem with the scalar settings of ``values`` (β, γ, m, κ, k)."""
        return replace(self, **{k: float(values[k]) for k in
                                ("beta", "gamma", "mass", "kappa", "confinement")
                                if k in values})


def feature_force(A, X, M):
    """``f(A, X) = −∇_X F(A; X) = A X Mᵀ + Aᵀ X M``, shape (N, d)."""
    return A @ (X @ M.T) + A.T @ (X @ M)


def pin(prob, force):
    """``force`` with its last ``prob.fixed`` columns set to 0 (in place; returned)."""
    if prob.fixed:
        force[:, -prob.fixed:] = 0.0
    return force


def confinement_energy(prob, X):
    """``(k/2)‖X‖²``."""
    return 0.5 * prob.confinement * float(np.sum(X * X))


def build(values, given, *, problem_type=Problem, path=False, momentum=True, slaved=False,
          tracked=False, free_motion=True):
    """The problem and initial state of a Part I model.

    Parameters
    ----------
    values : dict
        Setting values.
    given : dict
        User-given arrays (``features``, ``momenta``, ``attention``), validated.
    problem_type : type
        The model's :class:`Problem` (sub)class.
    path : bool
        The features follow the prescribed path (attention-only model).
    momentum : bool
        The model has momenta (``init_momentum`` applies).
    slaved : bool
        Attention is ``A*(X)`` (reduced, transformer).
    tracked : bool
        The model keeps the tracking bound ``B`` (its target is ``A*``).
    free_motion : bool
        ``Ẋ(0) = P(0)/m`` enters ``dS/dt(0)`` (canonical); otherwise it is 0 at t = 0.

    Returns
    -------
    problem, state
    """
    if values.get("heads", "one") == "all":
        raise ValueError(f"heads must be 'one' for model {values['model']!r}: heads='all' "
                         f"runs the canonical model only (Theory: several heads)")
    refuse_unused(values, given, momentum=momentum, slaved=slaved)
    real = real_head(values)
    if real is None:
        N, d = values["n_tokens"], values["dim"]
        data = draw_initial_data(N, d, values["seed"])
        X_in = given.get("features", data.X)
        M, W_V, tokens, unit = (given.get("score_matrix", data.M),
                                given.get("value_matrix", data.W_V), (), 1.0)
    else:  # N, d from the sentence; the random directions at the features' scale
        X_in, M, W_V, tokens = real
        N, d = X_in.shape
        data = draw_initial_data(N, d, values["seed"])
        unit = float(np.sqrt(np.mean(X_in * X_in)))
    feature_path = None
    if path:
        feature_path = FeaturePath(
            kind=values["path"], X0=X_in, Y=unit * data.Y, Q=data.Q, omega=values["omega"],
            amplitude=values["amplitude"], switch_time=values["switch_time"],
            settle_rate=values["settle_rate"])
    prob = problem_type(M=M, W_V=W_V, beta=values["beta"],
                        gamma=values.get("gamma", 1.0), mass=values.get("mass", 1.0),
                        kappa=values.get("kappa", 0.0),
                        confinement=values.get("confinement", 0.0), path=feature_path,
                        tokens=tokens, fixed=0 if real is None else 1)
    X, X_dot = feature_path(0.0) if path else (X_in, np.zeros((N, d)))
    P = np.zeros((N, d))
    if momentum and values.get("init_momentum") == "random":
        P = pin(prob, unit * data.P)
    if momentum and "momenta" in given:
        P = given["momenta"]
    S = en.scores(X, prob.M)
    init = values.get("init_attention", "uniform")
    if slaved or init == "softmax":
        Z = prob.beta * S
    elif init == "uniform":
        Z = np.zeros((N, N))
    else:
        Z = data.Z
    if "attention" in given and not slaved:
        Z = np.log(given["attention"])
    Z = Z - Z.max(axis=1, keepdims=True)
    if free_motion:
        X_dot = P / prob.mass
    S_dot = score_rate(X, X_dot, prob.M)
    B = en.oscillation(Z - prob.beta * S) if tracked else np.zeros(N)
    return prob, State(t=0.0, X=X, P=P, Z=Z, A=en.rowsoftmax(Z), S=S, S_dot=S_dot, B=B)


class UnusedArrays(ValueError):
    """Given arrays the model has no use for (``names``)."""

    def __init__(self, message, names):
        super().__init__(message)
        self.names = tuple(names)


def refuse_unused(values, given, *, momentum=True, slaved=False):
    """An :class:`UnusedArrays` (a ``ValueError``) naming a given array the model has no
    use for: ``momenta`` of a first-order model, ``attention`` of a model whose attention
    is ``A*(X)``."""
    unused = [name for name, used in (("momenta", momentum), ("attention", not slaved))
              if name in given and not used]
    if unused:
        raise UnusedArrays(f"model {values['model']!r} has no {' and no '.join(unused)} of its "
                         f"own (first order, or attention slaved to A*(X)): give no "
                         f"{', '.join(unused)}", unused)


def first_order_reference(velocity):
    """The ``readable["reference"]`` of a first-order flow ``Ẋ = velocity(prob, X)``:
    ``(prob, state) -> (rhs, y0, unpack)`` for ``solve_ivp``, ``y = X.ravel()``."""
    def reference(prob, state):
        N, d = state.X.shape

        def rhs(_t, y):
            return velocity(prob, y.reshape(N, d)).ravel()

        def unpack(y):
            return {"X": y.reshape(N, d)}

        return rhs, state.X.ravel().copy(), unpack

    return reference


def real_head(values):
    """``(X_in, M, W_V, tokens)`` of the real head the settings choose, at the readable
    scales of :mod:`dynamics.heads` (the shipped file's or a checkpoint's,
    :func:`dynamics.real_heads.chosen`), or None (``weights="seed"``)."""
    if values.get("weights", "seed") == "seed":
        return None
    real = real_heads.chosen(values)
    X, M, W_V = real.scaled()
    return X, M[0], W_V[0], real.tokens


def same_state(prob, state, values):
    """After a setting change: the problem with the new β, γ, m, κ, k; the same state."""
    return prob.with_values(values), state


def retrack(prob, state, values, *, free_motion=True):
    """After a setting change of a model that keeps the tracking bound: the new problem,
    and the state with its bound still a bound. A change of β moves the log-odds
    ``W = Z − βS`` by ``−Δβ S``, so ``osc(W_i)`` grows by at most ``|Δβ| osc(S_i)``: ``B``
    grows by that much. With ``free_motion`` (``Ẋ = P/m``) a change of ``m`` changes
    ``dS/dt``, recomputed here."""
    new = prob.with_values(values)
    S = scores_of(prob, state)
    B = state.B
    if new.beta != prob.beta:
        B = B + abs(new.beta - prob.beta) * en.oscillation(S)
    S_dot = state.S_dot
    if free_motion and new.mass != prob.mass:
        S_dot = score_rate(state.X, state.P / new.mass, new.M)
    return new, replace(state, B=B, S_dot=S_dot)


def retrack_on_path(prob, state, values):
    """:func:`retrack` for features on a prescribed path (``dS/dt`` comes from the path)."""
    return retrack(prob, state, values, free_motion=False)


def reslave(prob, state, values):
    """After a setting change of a slaved model: the new problem, and the state with its
    attention moved to ``A*(X)`` at the new β."""
    prob = prob.with_values(values)
    Z = centre_rows(prob.beta * state.S)
    return prob, replace(state, Z=Z, A=en.rowsoftmax(Z))


@dataclass(frozen=True)
class SlavedProblem(Problem):
    """A problem whose attention is slaved to the features, ``A = A*(X)``."""

    def softmax_into(self, X, out):
        """``A*(X) = rowsoftmax(β X M Xᵀ)`` computed in ``out``, shape (N, N)."""
        A = np.matmul(X @ self.M, X.T, out=out)
        if self.beta != 1.0:
            A *= self.beta
        centre_rows(A, out=A)
        return en.rowsoftmax(A, centred=True, out=A)

    def slaved(self, X, owned, busy=()):
        """Scores, logits and attention ``A*(X)`` of a state whose attention is slaved, in
        arrays of ``owned`` (:class:`~dynamics.workspace.Owned`)."""
        shape = (X.shape[0],) * 2
        S = np.matmul(X @ self.M, X.T, out=owned.take("slaved.S", shape, busy))
        Z = np.multiply(S, self.beta, out=owned.take("slaved.Z", shape, busy))
        centre_rows(Z, out=Z)
        return S, Z, en.rowsoftmax(Z, centred=True, out=owned.take("slaved.A", shape, busy))


# -- the confinement that keeps H bounded below (Theory page: coupled models) -----------
#: Models whose energy is ``F`` (or ``Φ``) plus ``(k/2)‖X‖²`` and a non-negative rest, so
#: that ``k > 2√N ‖M‖₂`` bounds ``H`` below (their features then stay bounded).
CONFINED_MODELS = ("canonical", "value_matching", "reduced")


def confinement_bound(source, n_tokens: int | None = None) -> float:
    """``2√N ‖M‖₂``: a confinement ``k`` above it bounds ``H`` below.

    ``|⟨A, X M Xᵀ⟩| ≤ √N ‖M‖₂ ‖X‖²`` for every row-stochastic ``A``, so
    ``F + (k/2)‖X‖² ≥ (k/2 − √N ‖M‖₂) ‖X‖² − const``. A sufficient bound: below it ``H``
    need not be bounded below (and a run may grow without bound), above it it is.

    Parameters
    ----------
    source : Settings, dict or ndarray
        Settings (``n_tokens``, ``dim``, ``seed``: ``M`` is drawn from the seed as a run
        draws it; or the real head, or heads, of ``weights``), or ``M`` itself, shape
        (d, d), or one per head, shape (H, d, d) (the bound of the summed energy,
        ``2√N Σ_h ‖M_h‖₂``).
    n_tokens : int, optional
        ``N`` (needed with ``M``).

    Returns
    -------
    float
    """
    if isinstance(source, np.ndarray):
        if n_tokens is None:
            raise ValueError("confinement_bound(M, n_tokens) needs n_tokens")
        M, N = source, n_tokens
    else:
        values = source if isinstance(source, dict) else source.values()
        if values.get("weights", "seed") != "seed":
            real = real_heads.chosen(values, "all" if values.get("heads") == "all" else None)
            M, N = real.scaled()[1], len(real.tokens)
        else:
            N = values["n_tokens"]
            M = draw_initial_data(N, values["dim"], values["seed"]).M
    norms = np.linalg.matrix_norm(M.reshape((-1, *M.shape[-2:])), ord=2)
    return 2.0 * math.sqrt(N) * float(np.sum(norms))


def confinement_notice(settings, M=None, n_tokens=None) -> str | None:
    """What to say about the confinement ``k`` of a run, or None.

    For the models of :data:`CONFINED_MODELS` whose ``k`` is at most
    :func:`confinement_bound`: names the bound and a ``k`` that confines ("k = 2 is below
    2√N‖M‖₂ = 6.9, the confinement that keeps H bounded below: try k ≥ 7"). A run that
    diverges says it too.

    Parameters
    ----------
    settings : Settings or dict
    M : ndarray, shape (d, d) or (H, d, d), optional
        The run's own score matrix (or one per head), with ``n_tokens``; else the one the
        settings give.
    n_tokens : int, optional
    """
    values = settings if isinstance(settings, dict) else settings.values()
    if values["model"] not in CONFINED_MODELS:
        return None
    bound = confinement_bound(values) if M is None else confinement_bound(M, n_tokens)
    k = float(values["confinement"])
    if k > bound:
        return None
    return (f"k = {k:g} is below 2√N‖M‖₂ = {bound:.2g}, the confinement that keeps H "
            f"bounded below: try k ≥ {math.floor(bound) + 1:d}")


#: ``‖X‖`` at this multiple of its start: the features are running away, and a run below
#: the confinement bound says so (:func:`runaway_notice`).
RUNAWAY_GROWTH = 2.0


def runaway_notice(settings, norm0: float, norm: float, t: float, M=None,
                   n_tokens=None) -> str | None:
    """The confinement notice of a run whose features are running away, or None.

    The bound ``2√N‖M‖₂`` is sufficient, not necessary: below it most runs stay bounded
    (the defaults and the energy-law presets at k = 2: ‖X‖ never exceeds its start over
    t ≤ 60), so it is said when it matters, once ``‖X‖`` has grown to
    :data:`RUNAWAY_GROWTH` times its start (the β quench at k = 2 from t ≈ 12, twelve
    time units before it diverges): "‖X‖ has grown from 7.3 to 15 by t = 12: k = 2 is
    below 2√N‖M‖₂ = 6.9, …" (:func:`confinement_notice`).

    Parameters
    ----------
    settings : Settings or dict
    norm0, norm : float
        ``‖X‖`` at the start of the run and at time ``t``.
    t : float
    M, n_tokens : optional
        The run's own score matrix (or one per head) and N, as for :func:`confinement_notice`.
    """
    if not (norm0 > 0 and norm > RUNAWAY_GROWTH * norm0):  # (also False for NaN)
        return None
    notice = confinement_notice(settings, M, n_tokens)
    if notice is None:
        return None
    return f"‖X‖ has grown from {norm0:.2g} to {norm:.2g} by t = {t:.3g}: {notice}"
