"""The experiments of the inertial attention lab, as pure functions over arrays.

One run of the lab (:func:`run_lab_experiment`) takes one :class:`~dynamics.Settings`
and returns a :class:`LabResult`, every array its plots show (Theory page, Part II):

1. the data (:func:`lab_data`): kernel ``A ≻ 0`` and value ``V = Vᵀ`` from their
   eigenvalues ``a``, ``v``, and a token cloud ``X(0)`` whitened to ``S(0) = s₀ I``;
2. blow-up (:func:`blowup_times`): the first-order ``T_max = min 1/(2 a_k v_k s₀)`` of
   ``Ṡ = V S A S + S A S V`` (closed form; numerical for a file's data) and the blow-up
   time of the accelerated moment system ``(S, P)``, ``P(0) = 0``, found numerically;
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

Your own data: ``run_lab_experiment(settings, arrays={...})`` runs every experiment from
the features ``X`` (and optionally the kernel ``A``, the value ``V``, the momenta ``P``)
of a weights file instead of the generated ones (:mod:`dynamics.inertial.lab_files`); a
matrix the file lacks comes from its diagonal setting. The first-order ``T_max`` is then
found numerically (the closed form needs ``A``, ``V`` and ``S(0)`` that commute); the
moment systems, the clouds and the layers start at rest (``P(0) = 0``) as always, and the
momenta start the streamed softmax models that have momenta (the inertial one runs only
when ``A`` and ``V`` commute).

Import it as ``dynamics.inertial.experiments``: ``dynamics.inertial`` does not re-export
it, because the models import that package while ``dynamics`` loads, before the
:class:`~dynamics.Settings` and :func:`~dynamics.simulate` this module uses exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..settings import Settings
from .accelerated import accelerated_trajectory
from .clouds import initial_cloud, second_moment
from .damping import Damping

# the curves and their constants, re-exported: the lab's view reads them from here
from .lab_curves import (  # noqa: F401
    CLOUD_FRACTION,
    CLOUD_SAMPLES,
    DIAGONALS,
    EIGEN_SAMPLES,
    H_TERMS_LIMIT,
    LAYER_SCHEMES,
    SOFTMAX_FRAMES,
    SOFTMAX_MODELS,
    SOFTMAX_NORM_LIMIT,
    SOFTMAX_STEPS,
    T_LIMIT,
    THRESHOLD,
    TOLERANCES,
    Curve,
    LabData,
    cloud_moment_curves,
    eigenvalue_curves,
    finite_points,
    hamiltonian_curve,
    later_cloud,
    layer_curves,
    softmax_curves,
)

# the data of a weights file, re-exported: the lab's callers read its limits from here
from .lab_files import (  # noqa: F401
    LAB_ARRAYS,
    LAB_MAX_DIM,
    LAB_MAX_TOKENS,
    SCALE_LIMIT,
    file_data,
    file_shape,
)
from .linear import (
    MomentTrajectory,
    first_order_blowup_time,
    moment_trajectory,
)
from .matrices import model_matrices, parse_diagonal


@dataclass(frozen=True)
class LabResult:
    """Everything one run of the lab shows.

    Attributes
    ----------
    settings : dict
        The setting values of the run.
    data : LabData
    first_order_time : float
        ``T_max`` of the first-order flow (closed form; for a file's data the time
        ``λ_max(S)`` reaches :data:`THRESHOLD`), ``inf`` if it does not blow up.
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
        ``(t, H(S(t), P(t)))`` of the accelerated moment system while the solver
        resolves it (:func:`~dynamics.inertial.lab_curves.hamiltonian_curve`: up to where
        its terms reach :data:`H_TERMS_LIMIT` times their start), never its last sample.
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


def lab_settings(values: Settings | Mapping, *, parse_diagonals: bool = True,
                 **changes) -> Settings:
    """New :class:`Settings` of a lab run: ``values``, then ``changes``.

    The diagonals of ``A`` and ``V`` (``kernel_diag``, ``value_diag``) are parsed before
    the settings take them, so that a message names the matrix ("A diagonal needs 1 or
    d = 2 values …").

    Parameters
    ----------
    values : Settings or mapping
        A mapping gives some settings; the others keep their defaults.
    parse_diagonals : bool
        False: the diagonals are taken as they are (a run whose ``A`` and ``V`` come
        from a file does not read them).
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
    for key, text in diagonals.items() if parse_diagonals else ():
        parse_diagonal(text, settings.dim, DIAGONALS[key])
    settings.param.update(**diagonals)
    return settings


def lab_data(settings: Settings, arrays: Mapping | None = None) -> LabData:
    """``A``, ``V`` and ``X(0)`` of a lab run (one random generator seeded by ``seed``).

    Parameters
    ----------
    settings : Settings
        Reads ``dim``, ``n_tokens``, ``kernel_diag``, ``value_diag``, ``matrix_draw``,
        ``cloud``, ``second_moment``, ``seed`` and the damping.
    arrays : mapping, optional
        Data of a weights file (:func:`file_data`), replacing the generated data.

    Returns
    -------
    LabData

    Raises
    ------
    ValueError
        A diagonal does not parse, ``A`` is not positive definite, ``n_tokens < dim``, or
        the Nesterov damping starts at ``t0 = 0`` (only the base case,
        :mod:`dynamics.inertial.momentum`, takes it).
    """
    if Damping.from_settings(settings).singular:
        raise ValueError("nesterov_t0 must be > 0 for the attention experiments: α = r/t "
                         "is infinite at t = 0 (t0 = 0 is for momentum on a quadratic)")
    if arrays:
        return file_data(settings, arrays)
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
        ``T_max = min_{v_k > 0} 1/(2 a_k v_k s0)`` (closed form), ``inf`` if ``V ⪯ 0``;
        for a file's data (``data.a`` None: ``A``, ``V``, ``S(0)`` need not commute) the
        time ``λ_max(S)`` of ``Ṡ = VSAS + SASV`` reaches :data:`THRESHOLD`, ``inf`` if not
        before :data:`T_LIMIT`.
    accelerated : float
        Time ``λ_max(S)`` of the ``(S, P)`` system with ``P(0) = 0`` reaches
        :data:`THRESHOLD`, ``inf`` if not before :data:`T_LIMIT`.
    """
    d = data.A.shape[0]
    if data.a is None:
        first = moment_trajectory(data.S0, data.A, data.V, T_LIMIT, threshold=THRESHOLD,
                                  **TOLERANCES).blowup_time
    else:
        first = first_order_blowup_time(data.a, data.v, np.full(d, data.s0))
    acc = accelerated_trajectory(data.A, data.V, data.S0, np.zeros((d, d)), data.damping,
                                 T_LIMIT, threshold=THRESHOLD, **TOLERANCES)
    return first, acc.blowup_time


#: The horizon where neither flow blows up: long enough to see that none escapes.
NO_BLOWUP_HORIZON = 10.0


def lab_horizon(first_order_time: float, accelerated_time: float) -> float:
    """``1.2 ×`` the latest finite blow-up time (at least 1), at most :data:`T_LIMIT`;
    :data:`NO_BLOWUP_HORIZON` where neither flow blows up (1.2 showed "no blow-up"
    over a time too short to say so)."""
    finite = [t for t in (first_order_time, accelerated_time) if np.isfinite(t)]
    if not finite:
        return NO_BLOWUP_HORIZON
    return min(T_LIMIT, 1.2 * max(*finite, 1.0))


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


def run_lab_experiment(settings: Settings | Mapping, arrays: Mapping | None = None,
                       **changes) -> LabResult:
    """Run every experiment of the inertial lab.

    Parameters
    ----------
    settings : Settings or mapping
        The lab's settings (a mapping: some values, defaults for the others); not
        changed.
    arrays : mapping, optional
        Data of a weights file (:func:`file_data`; ``n_tokens`` and ``dim`` follow its
        ``features``; the diagonal of ``A`` or ``V`` is read only if the file lacks it).
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
    if arrays:  # N, d from the file (checked first: its messages name the file's arrays)
        n, d = file_shape(arrays)
        changes = {"n_tokens": n, "dim": d, **changes}
    # with data from a file, file_data reads the diagonal of a matrix the file lacks only
    s = lab_settings(settings, parse_diagonals=not arrays, **changes)
    data = lab_data(s, arrays)
    t_first, t_acc = blowup_times(data)
    horizon = lab_horizon(t_first, t_acc)
    first, acc = moment_runs(data, horizon)
    cloud_time, cloud = later_cloud(data, t_first, horizon)
    layers, crossing_layer, predicted_layer = layer_curves(data, acc, s.layer_h, s.theta)
    softmax, messages = softmax_curves(s, arrays)
    return LabResult(
        settings=s.values(), data=data, first_order_time=t_first, accelerated_time=t_acc,
        horizon=horizon, first_order_eigenvalues=eigenvalue_curves(first),
        accelerated_eigenvalues=eigenvalue_curves(acc), cloud_time=cloud_time,
        later_cloud=cloud, cloud_moments=cloud_moment_curves(data, s.seed, horizon),
        layers=layers, layer_h=float(s.layer_h), theta=float(s.theta),
        crossing_layer=crossing_layer, predicted_layer=predicted_layer,
        hamiltonian=hamiltonian_curve(data, acc), softmax=softmax, messages=messages)
