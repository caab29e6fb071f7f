"""The experiments of the inertial attention lab, as pure functions over arrays.

One run of the lab (:func:`run_lab_experiment`) takes one :class:`~dynamics.Settings`
and returns a :class:`LabResult`, every array its plots show (Theory page, Part II):

1. the data (:func:`lab_data`): kernel ``A ≻ 0`` and value ``V = Vᵀ`` from their
   eigenvalues ``a``, ``v``, and a token cloud ``X(0)`` whitened to ``S(0) = s₀ I``;
2. blow-up (:func:`blowup_times`): the first-order ``T_max = min 1/(2 a_k v_k s₀)`` of
   ``Ṡ = V S A S + S A S V`` (closed form) and the blow-up time of the accelerated
   moment system ``(S, P)``, ``P(0) = 0``, found numerically;
3. the eigenvalues of ``S(t)`` of both moment systems up to a common horizon
   (:func:`lab_horizon`, :func:`moment_runs`, :func:`eigenvalue_curves`);
4. the first-order particle flow ``ẋ_i = V S A x_i``: the cloud shortly before
   ``T_max`` (:func:`later_cloud`) and ``λ_max(S(t))`` of three clouds of different
   shape with the same ``S(0)`` (:func:`cloud_moment_curves`);
5. attention layers of step ``h`` (accelerated system, explicit Euler and
   kick-damp-drift) against the continuous flow read at ``t/h``, and the first layer
   whose ``λ_max(S_l)`` crosses ``θ`` against ``⌈T_θ/h⌉`` (:func:`layer_curves`);
6. ``H(S, P)`` along the accelerated moment system (:func:`hamiltonian_curve`);
7. ``λ_max(S(t))`` of the streamed softmax models, inertial, momentum-only and first
   order, run by :func:`dynamics.simulate` (:func:`softmax_curves`).

Curves (:class:`Curve`) hold only finite points, and only ``y > 0`` where they are
drawn on a logarithmic axis, so that a view can draw them as they are.

Import it as ``dynamics.inertial.experiments``: ``dynamics.inertial`` does not re-export
it, because the models import that package while ``dynamics`` loads, before the
:class:`~dynamics.Settings` and :func:`~dynamics.simulate` this module uses exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..settings import Settings
from ..trajectory import simulate
from .accelerated import accelerated_trajectory, matrix_hamiltonian
from .blowup import integrate_until_blowup
from .clouds import CLOUDS, initial_cloud, second_moment
from .damping import Damping
from .layers import layer_crossing
from .linear import (
    MomentTrajectory,
    first_order_blowup_time,
    largest_eigenvalue,
    linear_velocity,
    moment_trajectory,
)
from .matrices import model_matrices, parse_diagonal

#: Latest time any continuous run of the lab goes to.
T_LIMIT = 40.0
#: ``λ_max(S)`` at which a run counts as blown up.
THRESHOLD = 1e8
#: Tolerances of the lab's ``solve_ivp`` runs.
TOLERANCES = {"rtol": 1e-8, "atol": 1e-10}
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
    a, v : ndarray, shape (d,)
        Eigenvalues of the kernel ``A`` and of the value ``V``.
    A, V : ndarray, shape (d, d)
        Kernel (symmetric positive definite) and value (symmetric); they commute.
    X0 : ndarray, shape (N, d)
        Initial tokens, with second moment ``S(0) = s0 I`` to rounding.
    S0 : ndarray, shape (d, d)
        ``S(0) = (1/N) X0ᵀ X0`` as computed.
    s0 : float
        The requested ``S(0) = s0 I`` (``settings.second_moment``).
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


@dataclass(frozen=True)
class LabResult:
    """Everything one run of the lab shows.

    Attributes
    ----------
    settings : dict
        The setting values of the run.
    data : LabData
    first_order_time : float
        ``T_max`` of the first-order flow (closed form), ``inf`` if it does not blow up.
    accelerated_time : float
        Blow-up time of the accelerated moment system with ``P(0) = 0`` (numerical, up
        to :data:`T_LIMIT`), ``inf`` if none.
    horizon : float
        End time of the eigenvalue, Hamiltonian and cloud curves (:func:`lab_horizon`).
    first_order_eigenvalues, accelerated_eigenvalues : tuple of Curve
        ``d`` curves ``(t, λ_k(S(t)))``, eigenvalues in ascending order, ``λ_k > 0``.
    cloud_time : float
        Time of :attr:`later_cloud`.
    later_cloud : ndarray, shape (N, d)
        Tokens of the first-order particle flow at :attr:`cloud_time` (``X(0)`` if that
        state is not finite).
    cloud_moments : dict of str to Curve
        For each cloud shape of :data:`dynamics.inertial.CLOUDS`: ``(t, λ_max(S(t)))``
        of the first-order particle flow, ``λ_max > 0``.
    layers : dict of str to Curve
        ``"euler"``, ``"kick_damp_drift"``: ``(l, λ_max(S_l))`` after each layer ``l``;
        ``"continuous"``: ``(t/h, λ_max(S(t)))`` of the accelerated moment system, up to
        the last layer run. ``λ_max > 0``.
    layer_h, theta : float
        Layer step ``h`` and threshold ``θ``.
    crossing_layer, predicted_layer : int or None
        First kick-damp-drift layer with ``λ_max(S_l) ≥ θ``, and ``⌈T_θ/h⌉`` from the
        continuous system (None: no crossing).
    hamiltonian : Curve
        ``(t, H(S(t), P(t)))`` of the accelerated moment system, its last sample (the
        state at the blow-up or at the horizon) left out.
    softmax : dict of str to Curve
        For each model of :data:`SOFTMAX_MODELS`: ``(t, λ_max(S(t)))`` every
        :data:`SOFTMAX_STEPS` steps of ``settings.dt``, ``λ_max > 0`` (empty for a
        model that cannot run these settings).
    messages : tuple of str
        Why a softmax model did not run (``"softmax_inertial: …"``), in model order.
    """

    settings: dict
    data: LabData
    first_order_time: float
    accelerated_time: float
    horizon: float
    first_order_eigenvalues: tuple
    accelerated_eigenvalues: tuple
    cloud_time: float
    later_cloud: np.ndarray
    cloud_moments: dict
    layers: dict
    layer_h: float
    theta: float
    crossing_layer: int | None
    predicted_layer: int | None
    hamiltonian: Curve
    softmax: dict
    messages: tuple


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


def lab_settings(values: Settings | Mapping, **changes) -> Settings:
    """New :class:`Settings` of a lab run: ``values``, then ``changes``.

    The diagonals of ``A`` and ``V`` (``kernel_diag``, ``value_diag``) are parsed before
    the settings take them, so that a message names the matrix ("A diagonal needs 1 or
    d = 2 values …").

    Parameters
    ----------
    values : Settings or mapping
        A mapping gives some settings; the others keep their defaults.
    **changes
        Setting values replacing those of ``values``.

    Returns
    -------
    Settings
        A fresh object (changing it later does not change ``values``).

    Raises
    ------
    ValueError
        A value is refused, or a diagonal is not one number or ``d`` numbers.
    """
    merged = {**(values.values() if isinstance(values, Settings) else dict(values)), **changes}
    diagonals = {k: merged.pop(k) for k in DIAGONALS if k in merged}
    settings = Settings(**merged)
    for key, text in diagonals.items():
        parse_diagonal(text, settings.dim, DIAGONALS[key])
    settings.param.update(**diagonals)
    return settings


def lab_data(settings: Settings) -> LabData:
    """``A``, ``V`` and ``X(0)`` of a lab run (one random generator seeded by ``seed``).

    Parameters
    ----------
    settings : Settings
        Reads ``dim``, ``n_tokens``, ``kernel_diag``, ``value_diag``, ``matrix_draw``,
        ``cloud``, ``second_moment``, ``seed`` and the damping.

    Returns
    -------
    LabData

    Raises
    ------
    ValueError
        A diagonal does not parse, ``A`` is not positive definite, or ``n_tokens < dim``.
    """
    d = settings.dim
    a = parse_diagonal(settings.kernel_diag, d, DIAGONALS["kernel_diag"])
    v = parse_diagonal(settings.value_diag, d, DIAGONALS["value_diag"])
    rng = np.random.default_rng(settings.seed)
    A, V = model_matrices(a, v, d, settings.matrix_draw, rng)
    X0 = initial_cloud(settings.cloud, settings.n_tokens, d, settings.second_moment, rng)
    return LabData(a, v, A, V, X0, second_moment(X0), float(settings.second_moment),
                   Damping.from_settings(settings))


def blowup_times(data: LabData) -> tuple[float, float]:
    """Blow-up times of the first-order and the accelerated moment systems.

    Parameters
    ----------
    data : LabData

    Returns
    -------
    first_order : float
        ``T_max = min_{v_k > 0} 1/(2 a_k v_k s0)`` (closed form), ``inf`` if ``V ⪯ 0``.
    accelerated : float
        Time ``λ_max(S)`` of the ``(S, P)`` system with ``P(0) = 0`` reaches
        :data:`THRESHOLD`, ``inf`` if not before :data:`T_LIMIT`.
    """
    d = data.A.shape[0]
    first = first_order_blowup_time(data.a, data.v, np.full(d, data.s0))
    acc = accelerated_trajectory(data.A, data.V, data.S0, np.zeros((d, d)), data.damping,
                                 T_LIMIT, threshold=THRESHOLD, **TOLERANCES)
    return first, acc.blowup_time


def lab_horizon(first_order_time: float, accelerated_time: float) -> float:
    """``1.2 ×`` the latest finite blow-up time (at least 1), at most :data:`T_LIMIT`."""
    return min(T_LIMIT, 1.2 * max(t for t in (first_order_time, accelerated_time, 1.0)
                                  if np.isfinite(t)))


def moment_runs(data: LabData, horizon: float
                ) -> tuple[MomentTrajectory, MomentTrajectory]:
    """``S(t)`` of the first-order and ``(S, P)(t)`` of the accelerated moment system.

    Parameters
    ----------
    data : LabData
    horizon : float

    Returns
    -------
    first_order, accelerated : MomentTrajectory
        At :data:`EIGEN_SAMPLES` times evenly spaced on ``[0, horizon]``, up to the
        blow-up (whose state is the last sample); ``P(0) = 0``.
    """
    d = data.A.shape[0]
    t_eval = np.linspace(0, horizon, EIGEN_SAMPLES)
    first = moment_trajectory(data.S0, data.A, data.V, horizon, t_eval=t_eval,
                              threshold=THRESHOLD, **TOLERANCES)
    acc = accelerated_trajectory(data.A, data.V, data.S0, np.zeros((d, d)), data.damping,
                                 horizon, t_eval=t_eval, threshold=THRESHOLD, **TOLERANCES)
    return first, acc


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
    """``(t, H(S, P))``, ``H = ½ tr(A S P² S) − ½ tr(V S)``, along the accelerated run.

    Parameters
    ----------
    data : LabData
    accelerated : MomentTrajectory

    Returns
    -------
    Curve
        The finite samples but the last (the state at the blow-up, whose ``H`` dwarfs
        the rest, or at the horizon).
    """
    H = [matrix_hamiltonian(S, P, data.A, data.V)
         for S, P in zip(accelerated.S, accelerated.P, strict=True)]
    points = finite_points(accelerated.t, H)
    if len(points.x) > 1:
        return Curve(points.x[:-1], points.y[:-1])
    return points


def softmax_curves(settings: Settings) -> tuple[dict[str, Curve], tuple[str, ...]]:
    """``λ_max(S(t))`` of the streamed softmax models with the lab's settings.

    Each model of :data:`SOFTMAX_MODELS` runs with ``settings`` (its own ``model``, and
    ``norm_limit`` = :data:`SOFTMAX_NORM_LIMIT`) through :func:`dynamics.simulate` for
    :data:`SOFTMAX_FRAMES` frames of :data:`SOFTMAX_STEPS` fixed steps of
    ``settings.dt``, stopping early when it diverges.

    Parameters
    ----------
    settings : Settings

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
        try:
            run_settings = settings.copy(model=model, norm_limit=SOFTMAX_NORM_LIMIT)
            run = simulate(run_settings, t_end=SOFTMAX_FRAMES * SOFTMAX_STEPS * settings.dt,
                           every=SOFTMAX_STEPS)
        except ValueError as exc:
            curves[model] = Curve(np.zeros(0), np.zeros(0))
            messages.append(f"{model}: {exc}")
            continue
        curves[model] = finite_points(run.times, run.diagnostics["second_moment_max"],
                                      positive=True)
    return curves, tuple(messages)


def run_lab_experiment(settings: Settings | Mapping, **changes) -> LabResult:
    """Run every experiment of the inertial lab.

    Parameters
    ----------
    settings : Settings or mapping
        The lab's settings (a mapping: some values, defaults for the others); not
        changed.
    **changes
        Setting values replacing those of ``settings`` for this run (e.g. the diagonals
        of ``A`` and ``V`` as typed).

    Returns
    -------
    LabResult

    Raises
    ------
    ValueError
        A setting is refused (:func:`lab_settings`) or the data cannot be built
        (:func:`lab_data`). A softmax model that cannot run is reported in
        :attr:`LabResult.messages` instead.
    """
    s = lab_settings(settings, **changes)
    data = lab_data(s)
    t_first, t_acc = blowup_times(data)
    horizon = lab_horizon(t_first, t_acc)
    first, acc = moment_runs(data, horizon)
    cloud_time, cloud = later_cloud(data, t_first, horizon)
    layers, crossing_layer, predicted_layer = layer_curves(data, acc, s.layer_h, s.theta)
    softmax, messages = softmax_curves(s)
    return LabResult(
        settings=s.values(), data=data, first_order_time=t_first, accelerated_time=t_acc,
        horizon=horizon, first_order_eigenvalues=eigenvalue_curves(first),
        accelerated_eigenvalues=eigenvalue_curves(acc), cloud_time=cloud_time,
        later_cloud=cloud, cloud_moments=cloud_moment_curves(data, s.seed, horizon),
        layers=layers, layer_h=float(s.layer_h), theta=float(s.theta),
        crossing_layer=crossing_layer, predicted_layer=predicted_layer,
        hamiltonian=hamiltonian_curve(data, acc), softmax=softmax, messages=messages)
