"""What the Part II models share (Theory page, Part II: inertial attention lab): their
fixed data, their initial state, the diagnostics every frame reports, and the tests that
stop a run.

Every Part II model moves tokens ``x_i`` (the rows of ``X``, shape (N, d)) and, for the
second-order ones, momenta ``y_i`` (the rows of ``Y``, the state's ``P``) under a kernel
``A`` and a value matrix ``V`` (shape (d, d)), with a damping ``α(t)``. Matrices act on
columns as on the Theory page (``A x_j``, ``V x_j``: in row form ``X Aᵀ``, ``X Vᵀ``). The
settings give symmetric, commuting ``A ≻ 0`` and ``V``; a :class:`Problem` built from
other matrices is refused where the model needs symmetry (:attr:`Problem.symmetric`).
A model module writes its readable field ``(problem, t, X, Y) -> (Ẋ, Ẏ)`` as on the Theory
page and its :class:`Problem` subclass the fused field the stepper calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..diagnostics import measure, momentum_norm
from ..inertial.clouds import initial_cloud
from ..inertial.damping import NO_DAMPING, Damping
from ..inertial.matrices import model_matrices, require_symmetric, value_kernel_ratio
from ..state import State
from .part_one import refuse_unused

#: Settings of the kernel, the value matrix and the initial cloud (a change restarts).
CLOUD_SETTINGS = ("kernel_diag", "value_diag", "matrix_draw", "cloud", "second_moment")
#: Settings of the damping schedule ``α(t)`` (a change continues from the state).
DAMPING_SETTINGS = ("damping", "alpha", "nesterov_r", "nesterov_t0")
#: Every setting a Part II model reads beyond the common ones.
SETTINGS = CLOUD_SETTINGS + DAMPING_SETTINGS
#: Settings that change a Part II run without a restart.
CONTINUE_SETTINGS = ("dt",) + DAMPING_SETTINGS
#: Relative tolerance of the test ``H(new) ≤ H(old)`` of the dissipative models, relative
#: to the size of the energy's terms (``1 + |kinetic| + |H − kinetic|``): ``H`` can be a
#: small difference of large terms (inertial softmax: both grow like ``Σ_i z_i``).
ENERGY_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Problem:
    """The fixed data of a Part II run.

    Attributes
    ----------
    A : ndarray, shape (d, d)
        Kernel (scores ``x_iᵀ A x_j``).
    V : ndarray, shape (d, d)
        Value matrix.
    damping : Damping
        The schedule ``α(t)``.
    B : ndarray, shape (d, d) or None
        ``V A⁻¹`` (symmetric positive definite) where the model needs it (computed from
        ``A`` and ``V`` when not given).
    symmetric : tuple of str (class attribute)
        The matrices the model needs symmetric (its Hamiltonian sees only their
        symmetric parts): a problem with another is refused with a ``ValueError``.
    model : str (class attribute)
        The model's name in messages.
    watched : str (class attribute)
        The norm the stop test watches besides the features (:meth:`measures`).
    second_order : bool (class attribute)
        The model carries momenta ``Y``.
    dissipative : bool (class attribute)
        ``dH/dt ≤ 0``: a step that raises ``H`` stops the run.
    softmax : bool (class attribute)
        Frames show the softmax kernel weights as attention.
    needs_ratio : bool (class attribute)
        :func:`build` computes ``B``.
    singular_start : bool (class attribute)
        The model runs the Nesterov damping from ``t0 = 0`` (``α = r/t``, infinite at
        ``t = 0``): its field takes the finite limit of ``α y`` there, its momenta start
        at rest (:func:`damping_of` refuses ``t0 = 0`` to the others).
    """

    A: np.ndarray
    V: np.ndarray
    damping: Damping = NO_DAMPING
    B: np.ndarray | None = None

    second_order: ClassVar[bool] = False
    dissipative: ClassVar[bool] = False
    softmax: ClassVar[bool] = False
    needs_ratio: ClassVar[bool] = False
    singular_start: ClassVar[bool] = False
    symmetric: ClassVar[tuple] = ()
    #: The model's name in messages.
    model: ClassVar[str] = "this model"
    #: What :meth:`measures` watches besides the features (named in the stop message).
    watched: ClassVar[str] = "momentum norm"

    def __post_init__(self):
        if self.needs_ratio and self.B is None:
            object.__setattr__(self, "B", value_kernel_ratio(self.A, self.V, self.model))
        for name in self.symmetric:
            require_symmetric(getattr(self, name), f"{name} (its Hamiltonian sees only "
                              "the symmetric part)", self.model)

    @cached_property
    def kernel_spd(self) -> bool:
        """``A`` is symmetric positive definite (then the softmax rows are shifted by a
        Cauchy–Schwarz bound instead of their maxima)."""
        A = self.A
        return bool(np.array_equal(A, A.T) and np.linalg.eigvalsh(A)[0] > 0)

    def field(self, t: float, y: np.ndarray, work) -> np.ndarray:
        """The fused field ``ẏ`` at the stacked state ``y = (X, Y)``, shape (2, N, d)."""
        raise NotImplementedError

    def energies(self, X: np.ndarray, Y: np.ndarray) -> tuple[float, float, float]:
        """``(H, kinetic, Σ_i y_i·∂H/∂y_i)`` at ``(X, Y)``; ``dH/dt = −α`` times the last
        (zeros for a model without ``H``)."""
        return 0.0, 0.0, 0.0

    def measures(self, X: np.ndarray, Y: np.ndarray) -> tuple[float, float, float, float]:
        """:meth:`energies` and the norm the stop test watches besides the features
        (:attr:`watched`: ``‖Y‖`` here)."""
        return (*self.energies(X, Y), momentum_norm(Y))

    def out_of_range(self, X: np.ndarray) -> str | None:
        """Why the state at features ``X`` (shape (N, d)) cannot be carried further in
        floating point although the dynamics goes on, or None (here: never)."""
        return None


def pack(dX: np.ndarray, dY: np.ndarray | None = None) -> np.ndarray:
    """``(Ẋ, Ẏ)`` stacked, shape (2, N, d) (``Ẏ = 0`` when ``dY`` is None)."""
    out = np.empty((2, *dX.shape))
    out[0] = dX
    if dY is None:
        out[1] = 0.0
    else:
        out[1] = dY
    return out


def damping_of(values: dict, singular_start: bool = False) -> Damping:
    """The damping schedule of the setting values.

    Raises
    ------
    ValueError
        ``nesterov_t0 = 0`` (``α = r/t``, infinite at ``t = 0``) for a model that does
        not take it (:attr:`Problem.singular_start` False).
    """
    damping = Damping(values["damping"], values["alpha"], values["nesterov_r"],
                      values["nesterov_t0"])
    if damping.singular and not singular_start:
        raise ValueError(f"nesterov_t0 must be > 0 for model {values['model']!r}: "
                         "α = r/(t + t0) is infinite at t = 0 when t0 = 0 (only "
                         "momentum_quadratic, whose momenta start at rest, takes t0 = 0)")
    return damping


def build(values: dict, given: dict, *, problem_type: type = Problem):
    """The problem and initial state of a Part II model.

    The kernel and value matrices come first from the seed's generator, then the cloud
    whitened to ``S(0) = s₀ I``; the momenta start at ``y_i(0) = P₀ x_i`` with ``P₀ = 0``.

    Parameters
    ----------
    values : dict
        Setting values.
    given : dict
        User-given arrays, validated: ``features`` (N, d) replace the cloud, ``momenta``
        (N, d) the zero momenta of a second-order model (a first-order one refuses them),
        ``kernel`` and ``value`` (d, d) the matrices of the settings (whose diagonal is
        then not read).
    problem_type : type
        The model's :class:`Problem` subclass.

    Returns
    -------
    problem, state

    Raises
    ------
    ValueError
        Bad ``kernel_diag`` / ``value_diag``, ``A`` not positive definite, momenta
        given to a first-order model (:class:`~dynamics.models.part_one.UnusedArrays`),
        ``B = V A⁻¹`` not positive definite where needed (the message says what to
        give), or ``n_tokens < dim`` for a cloud.
    """
    rng = np.random.default_rng(values["seed"])
    n, d = values["n_tokens"], values["dim"]
    # the diagonal of a given matrix is not read (it need not fit d), but the generator
    # draws as without it: the cloud is the same
    A, V = model_matrices("1" if "kernel" in given else values["kernel_diag"],
                          "1" if "value" in given else values["value_diag"], d,
                          values["matrix_draw"], rng)
    B = None
    if "kernel" in given or "value" in given:  # the problem checks them (and makes B)
        A, V = given.get("kernel", A), given.get("value", V)
    elif problem_type.needs_ratio:  # A, V commute: B ≻ 0 iff every v_k / a_k > 0
        B = value_kernel_ratio(A, V, values["model"], "give value_diag > 0 (got "
                               f"value_diag = {values['value_diag']!r})")
    if "features" in given:
        X = given["features"]
    else:
        X = initial_cloud(values["cloud"], n, d, values["second_moment"], rng)
    refuse_unused(values, given, momentum=problem_type.second_order, slaved=True)
    Y = given.get("momenta", np.zeros((n, d)))
    problem = problem_type(A=A, V=V, damping=damping_of(values, problem_type.singular_start),
                           B=B)
    return problem, State(t=0.0, X=X, P=Y)


def reproblem(problem: Problem, state: State, values: dict):
    """After a damping change: the problem with the new schedule, the same state."""
    return replace(problem, damping=damping_of(values, problem.singular_start)), state


def energy(problem: Problem, state: State, log_a=None) -> float:
    """``H`` of a state (models with a Hamiltonian)."""
    with np.errstate(all="ignore"):
        return problem.energies(state.X, state.P)[0]


def check(problem: Problem, old: State, new: State, memo, norm_limit: float):
    """Stop a Part II run after a step: ``(reason, accept, memo)``, ``memo`` being ``H``
    of the last accepted state.

    A non-finite state or energy is rejected; a feature norm, ``λ_max(S)`` or the norm
    the model watches (:attr:`Problem.watched`: the momenta, or the velocities of the
    inertial softmax model, whose momenta grow like ``z_i``) above ``norm_limit``, or
    (dissipative models) an energy that rose although ``dH/dt ≤ 0`` (by more than
    :data:`ENERGY_TOLERANCE` of the size of its terms), or a state about to leave the
    floating-point range (:meth:`Problem.out_of_range`), keeps the new state and stops.
    """
    if memo is None:
        start = measure(problem, old.X, old.P)
        memo = start[3] if start is not None else math.inf
    vals = measure(problem, new.X, new.P)
    if vals is None:
        return "the state or its energy became non-finite", False, memo
    norm, lmax, H, kinetic, before = vals[0], vals[1], vals[3], vals[4], memo
    if norm > norm_limit:
        return f"feature norm {norm:.3g} exceeds {norm_limit:g}", True, H
    if lmax > norm_limit:
        return f"second moment λ_max(S) = {lmax:.3g} exceeds {norm_limit:g}", True, H
    watched = vals[6]
    if watched > norm_limit:
        return f"{problem.watched} {watched:.3g} exceeds {norm_limit:g}", True, H
    limit = problem.out_of_range(new.X)
    if limit is not None:
        return limit, True, H
    scale = 1.0 + abs(kinetic) + abs(H - kinetic)
    if problem.dissipative and H > before + ENERGY_TOLERANCE * scale:
        return ("the energy increased although dH/dt ≤ 0 (the step is too large for this "
                "state; lower dt)"), True, H
    return None, True, H


def reference(field):
    """The ``solve_ivp`` reference of a model with readable field ``field``: a function
    ``(problem, state) -> (rhs, y0, unpack)`` with ``y = [X, Y]`` flattened (``[X]`` for a
    first-order model), ``unpack(y)`` giving ``X`` (and ``P``) of shape (N, d)."""

    def make(problem, state):
        N, d = state.X.shape
        nx = N * d
        second = problem.second_order

        def rhs(t, y):
            X = y[:nx].reshape(N, d)
            Y = y[nx:].reshape(N, d) if second else np.zeros((N, d))
            dX, dY = field(problem, t, X, Y)
            return np.concatenate([dX.ravel(), dY.ravel()]) if second else dX.ravel()

        def unpack(y):
            out = {"X": y[:nx].reshape(N, d)}
            if second:
                out["P"] = y[nx:].reshape(N, d)
            return out

        y0 = np.concatenate([state.X.ravel(), state.P.ravel()]) if second \
            else state.X.ravel().copy()
        return rhs, y0, unpack

    return make


__all__ = [
    "CLOUD_SETTINGS", "CONTINUE_SETTINGS", "DAMPING_SETTINGS", "Problem",
    "SETTINGS", "build", "check", "damping_of", "energy",
    "pack", "reference", "reproblem",
]
