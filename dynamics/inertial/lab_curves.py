"""The curves of the inertial attention lab: each experiment's arrays, as drawn.

The pieces :func:`dynamics.inertial.experiments.run_lab_experiment` puts together: the
eigenvalues of the moment systems, the first-order particle clouds, the attention layers,
the accelerated Hamiltonian and the streamed softmax models (Theory page, Part II).
Curves (:class:`Curve`) hold only finite points, and only ``y > 0`` where they are drawn
on a logarithmic axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..settings import Settings
from ..trajectory import simulate
from .accelerated import matrix_dissipation, matrix_hamiltonian
from .blowup import integrate_until_blowup
from .clouds import CLOUDS, initial_cloud, second_moment
from .damping import Damping
from .layers import layer_crossing
from .linear import (
    MomentTrajectory,
    largest_eigenvalue,
    linear_velocity,
)

#: Latest time any continuous run of the lab goes to.
T_LIMIT = 40.0
#: ``λ_max(S)`` at which a run counts as blown up.
THRESHOLD = 1e8
#: Tolerances of the lab's ``solve_ivp`` runs.
TOLERANCES = {"rtol": 1e-8, "atol": 1e-10}
#: The Hamiltonian curve stops where its terms exceed this many times their initial size
#: (:func:`hamiltonian_curve`).
H_TERMS_LIMIT = 1e3
#: Samples of the eigenvalue curves, and of the cloud comparison, over the horizon.
EIGEN_SAMPLES = 300
CLOUD_SAMPLES = 150
#: The later cloud is shown at this fraction of ``T_max`` (at the horizon if none).
CLOUD_FRACTION = 0.9
#: Layer schemes of the lab; the markers are those of the last.
LAYER_SCHEMES = ("euler", "kick_damp_drift")
#: Streamed softmax models: ``SOFTMAX_FRAMES`` frames of ``SOFTMAX_STEPS`` steps each,
#: a run stopping as diverged once ``λ_max(S)`` or a norm passes ``SOFTMAX_NORM_LIMIT``.
SOFTMAX_MODELS = ("softmax_inertial", "softmax_momentum", "softmax_first_order")
#: Those without momenta (a file's ``P`` is not given to them).
FIRST_ORDER_MODELS = ("softmax_first_order",)
SOFTMAX_STEPS = 5
SOFTMAX_FRAMES = 60
SOFTMAX_NORM_LIMIT = 1e6
#: The settings holding the diagonals of ``A`` and ``V``, and their names in messages.
DIAGONALS = {"kernel_diag": "A diagonal", "value_diag": "V diagonal"}


@dataclass(frozen=True)
class Curve:
    """The points of one curve.

    Attributes
    ----------
    x, y : ndarray, shape (K,)
        Finite coordinates, in the order computed (``K`` may be 0).
    """

    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class LabData:
    """The data of one lab run.

    Attributes
    ----------
    a, v : ndarray, shape (d,), or None
        Eigenvalues of the kernel ``A`` and of the value ``V`` (None: data of a file).
    A, V : ndarray, shape (d, d)
        Kernel (symmetric positive definite) and value (symmetric); generated, they
        commute.
    X0 : ndarray, shape (N, d)
        Initial tokens, generated with second moment ``S(0) = s0 I`` to rounding.
    S0 : ndarray, shape (d, d)
        ``S(0) = (1/N) X0ᵀ X0`` as computed.
    s0 : float or None
        The requested ``S(0) = s0 I`` (``settings.second_moment``; None: data of a file).
    damping : Damping
        ``α(t)`` of the accelerated models.
    """

    a: np.ndarray
    v: np.ndarray
    A: np.ndarray
    V: np.ndarray
    X0: np.ndarray
    S0: np.ndarray
    s0: float
    damping: Damping


def finite_points(x, y, positive: bool = False) -> Curve:
    """The points where both coordinates are finite (and ``y > 0`` if ``positive``).

    Parameters
    ----------
    x, y : array_like, shape (K,)
    positive : bool
        Also drop ``y ≤ 0`` (a curve on a logarithmic axis).

    Returns
    -------
    Curve
        As float arrays.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if positive:
        keep &= y > 0
    return Curve(x[keep], y[keep])


def eigenvalue_curves(run: MomentTrajectory) -> tuple[Curve, ...]:
    """``(t, λ_k(S(t)))`` for each eigenvalue ``k`` of ``S``, ascending, ``λ_k > 0``.

    Parameters
    ----------
    run : MomentTrajectory
        ``S`` of shape (n, d, d).

    Returns
    -------
    tuple of Curve
        ``d`` curves (one empty curve if the run has no sample).
    """
    lam = np.linalg.eigvalsh(run.S) if len(run.S) else np.zeros((0, 1))
    return tuple(finite_points(run.t, lam[:, k], positive=True) for k in range(lam.shape[1]))


def _first_order_particles(X: np.ndarray, A: np.ndarray, V: np.ndarray, t_max: float,
                           t_eval=None):
    """The first-order particle flow ``ẋ_i = V S A x_i`` from ``X`` (flattened states)."""
    n, d = X.shape
    return integrate_until_blowup(
        lambda t, y: linear_velocity(y.reshape(n, d), A, V).ravel(), X.ravel(), t_max,
        lambda y: largest_eigenvalue(second_moment(y.reshape(n, d))), THRESHOLD,
        t_eval=t_eval, **TOLERANCES)


def later_cloud(data: LabData, first_order_time: float, horizon: float
                ) -> tuple[float, np.ndarray]:
    """The tokens of the first-order particle flow shortly before its blow-up.

    Parameters
    ----------
    data : LabData
    first_order_time, horizon : float

    Returns
    -------
    t : float
        :data:`CLOUD_FRACTION` ``× T_max``, or ``horizon`` if ``T_max`` is infinite.
    X : ndarray, shape (N, d)
        ``X(t)`` (the last state reached if the run stopped earlier), or ``X(0)`` if it
        is not finite.
    """
    n, d = data.X0.shape
    t = CLOUD_FRACTION * first_order_time if np.isfinite(first_order_time) else horizon
    X1 = _first_order_particles(data.X0, data.A, data.V, t).y[-1].reshape(n, d)
    return t, (X1 if np.all(np.isfinite(X1)) else data.X0)


def cloud_moment_curves(data: LabData, seed: int, horizon: float) -> dict[str, Curve]:
    """``λ_max(S(t))`` of the first-order particle flow for clouds of each shape.

    Only the second moment drives the first-order flow: clouds of different shapes
    whitened to the same ``S(0)`` (that of ``data.X0``) follow the same ``S(t)``.

    Parameters
    ----------
    data : LabData
    seed : int
        Each cloud is drawn by its own generator seeded ``seed + 1``.
    horizon : float

    Returns
    -------
    dict of str to Curve
        For each kind of :data:`dynamics.inertial.CLOUDS`: ``(t, λ_max(S(t)))`` at
        :data:`CLOUD_SAMPLES` times on ``[0, horizon]`` up to the blow-up, ``λ_max > 0``.
    """
    n, d = data.X0.shape
    t_eval = np.linspace(0, horizon, CLOUD_SAMPLES)
    out = {}
    for kind in CLOUDS:
        Xk = initial_cloud(kind, n, d, data.S0, np.random.default_rng(seed + 1))
        run = _first_order_particles(Xk, data.A, data.V, horizon, t_eval=t_eval)
        lam = [largest_eigenvalue(second_moment(y.reshape(n, d))) for y in run.y]
        out[kind] = finite_points(run.t, lam, positive=True)
    return out


def layer_curves(data: LabData, accelerated: MomentTrajectory, h: float, theta: float
                 ) -> tuple[dict[str, Curve], int | None, int | None]:
    """Attention layers of step ``h`` against the continuous accelerated system.

    Parameters
    ----------
    data : LabData
    accelerated : MomentTrajectory
        The continuous ``(S, P)`` run (:func:`moment_runs`).
    h, theta : float
        Layer step and threshold on ``λ_max(S_l)``.

    Returns
    -------
    curves : dict of str to Curve
        ``"euler"`` and ``"kick_damp_drift"``: ``(l, λ_max(S_l))``, layers ``0 … L``
        (run :func:`dynamics.inertial.layer_crossing`, ``Y(0) = 0``, continuous search
        up to :data:`T_LIMIT`); ``"continuous"``: ``(t/h, λ_max(S(t)))`` for
        ``t/h ≤`` the number of kick-damp-drift samples. All with ``λ_max > 0``.
    crossing_layer, predicted_layer : int or None
        Of the kick-damp-drift layers: the first layer with ``λ_max(S_l) ≥ θ``, and
        ``⌈T_θ/h⌉`` (None: none).
    """
    curves, crossing = {}, None
    for scheme in LAYER_SCHEMES:
        crossing = layer_crossing(data.X0, data.A, data.V, h, theta, scheme=scheme,
                                  damping=data.damping, t_max=T_LIMIT)
        curves[scheme] = finite_points(np.arange(len(crossing.moments)), crossing.moments,
                                       positive=True)
    lam = np.linalg.eigvalsh(accelerated.S)[:, -1] if len(accelerated.S) else np.zeros(0)
    keep = accelerated.t / h <= len(crossing.moments)
    curves["continuous"] = finite_points(accelerated.t[keep] / h, lam[keep], positive=True)
    return curves, crossing.layer, crossing.predicted


def hamiltonian_curve(data: LabData, accelerated: MomentTrajectory) -> Curve:
    """``(t, H(S, P))``, ``H = ½ tr(A S P² S) − ½ tr(V S)``, along the accelerated run,
    while the run resolves it.

    Near the blow-up both terms of ``H`` grow without bound while ``H`` stays of its
    initial size (undamped) or falls: the solver's relative error on ``(S, P)``
    (:data:`TOLERANCES`) times the terms' size then exceeds ``H``'s own changes (an
    undamped run that conserves ``H = −0.5`` showed it drifting to −0.4986 in its last
    samples). Samples whose terms exceed :data:`H_TERMS_LIMIT` times their size at the
    start (at least 1) are left out: their ``H`` is then accurate to about
    ``rtol × H_TERMS_LIMIT`` of that size.

    Parameters
    ----------
    data : LabData
    accelerated : MomentTrajectory

    Returns
    -------
    Curve
        The finite samples up to the first one whose terms are too large, and never the
        last (the state at the blow-up or at the horizon).
    """
    A, V = data.A, data.V
    pairs = list(zip(accelerated.S, accelerated.P, strict=True))
    H = [matrix_hamiltonian(S, P, A, V) for S, P in pairs]
    size = np.array([0.5 * (abs(matrix_dissipation(S, P, A)) + abs(float(np.trace(V @ S))))
                     for S, P in pairs])  # |kinetic| + |potential|
    resolved = size <= H_TERMS_LIMIT * max(1.0, size[0]) if len(size) else size > 0
    stop = int(np.argmin(resolved)) if not resolved.all() else len(resolved) - 1
    points = finite_points(accelerated.t[:stop], H[:stop])
    return points


def softmax_curves(settings: Settings, arrays=None
                   ) -> tuple[dict[str, Curve], tuple[str, ...]]:
    """``λ_max(S(t))`` of the streamed softmax models with the lab's settings.

    Each model of :data:`SOFTMAX_MODELS` runs with ``settings`` (its own ``model``, and
    ``norm_limit`` = :data:`SOFTMAX_NORM_LIMIT`) through :func:`dynamics.simulate` for
    :data:`SOFTMAX_FRAMES` frames of :data:`SOFTMAX_STEPS` fixed steps of
    ``settings.dt``, stopping early when it diverges.

    Parameters
    ----------
    settings : Settings
    arrays : mapping, optional
        A weights file's ``features``, ``kernel``, ``value`` and ``momenta``, passed to
        :class:`dynamics.Simulation` (but the momenta to :data:`FIRST_ORDER_MODELS`).

    Returns
    -------
    curves : dict of str to Curve
        ``(t, λ_max(S(t)))`` of the recorded frames, ``λ_max > 0`` (empty for a model
        that cannot run these settings).
    messages : tuple of str
        ``"model: reason"`` for each such model.
    """
    curves, messages = {}, []
    for model in SOFTMAX_MODELS:
        given = dict(arrays or {})
        if model in FIRST_ORDER_MODELS:
            given.pop("momenta", None)
        try:
            run_settings = settings.copy(model=model, norm_limit=SOFTMAX_NORM_LIMIT)
            run = simulate(run_settings, t_end=SOFTMAX_FRAMES * SOFTMAX_STEPS * settings.dt,
                           every=SOFTMAX_STEPS, arrays=given)
        except ValueError as exc:
            curves[model] = Curve(np.zeros(0), np.zeros(0))
            messages.append(f"{model}: {exc}")
            continue
        curves[model] = finite_points(run.times, run.diagnostics["second_moment_max"],
                                      positive=True)
    return curves, tuple(messages)
