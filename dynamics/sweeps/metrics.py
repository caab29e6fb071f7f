"""What a sweep keeps of each run: the metrics (:data:`METRICS`), read from a run's
diagnostics (:func:`trajectory_metrics`) or from the inertial lab's experiments
(:func:`lab_metrics`), and the lag amplitude theory draws over a sweep's map
(:func:`two_source_lag_amplitude`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..settings import Settings
from ..trajectory import Trajectory


@dataclass(frozen=True)
class Metric:
    """A number a sweep keeps of each run.

    Attributes
    ----------
    name : str
    doc : str
        One line: what it is (Theory page section in words).
    part : int
        1: read from the run's diagnostics (Part I models); 2: the inertial lab's
        blow-up and layer quantities (Part II models).
    needs : tuple of str
        The diagnostics it reads (a sweep's runs compute only those its metrics need,
        :func:`diagnostics_needed`).
    states : bool
        It reads the recorded states (features, attention) besides the diagnostics
        (every run records them).
    """

    name: str
    doc: str
    part: int
    needs: tuple = ()
    states: bool = False


#: Every metric, by name.
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("kl_mean", "time average of the lag Σ_i KL(A_i‖A*_i) over the run "
           "(trapezoid over the recorded frames)", 1, ("kl",)),
    Metric("kl_final", "the lag Σ_i KL(A_i‖A*_i) at the last frame", 1, ("kl",)),
    Metric("kl_ratio_max", "maximum of kl / kl_bound, the lag over its tracking bound "
           "(≤ 1 where the bound holds; frames with kl_bound = 0 left out)", 1,
           ("kl", "kl_bound")),
    Metric("lag_amplitude", "maximum over rows and over the second half of the run of the "
           "log-odds lag osc(log A_i − log A*_i) (tracking the moving softmax)", 1,
           states=True),
    Metric("dissipated", "energy dissipated ∫D dt at the last frame", 1, ("dissipated",)),
    Metric("energy_residual_max", "maximum of |energy_residual| over the run (zero up to "
           "integrator error)", 1, ("energy_residual",)),
    Metric("diverged_at", "time at which the run diverged (NaN if it did not)", 0),
    Metric("t_final", "time of the last frame (t_end unless the run stopped)", 0),
    Metric("blowup_time", "blow-up time of the accelerated moment system with P(0) = 0 "
           "(numerical; NaN if none up to t = 40)", 2),
    Metric("first_order_blowup_time", "first-order T_max = min 1/(2 a_k v_k s0) (closed "
           "form; NaN if V ⪯ 0)", 2),
    Metric("crossing_layer", "first kick-damp-drift layer whose λ_max(S_l) reaches θ "
           "(NaN if none)", 2),
    Metric("predicted_layer", "⌈T_θ / h⌉ from the continuous accelerated system (NaN if "
           "none)", 2),
)}


def default_metrics(model: str) -> list[str]:
    """The metrics that mean something for ``model`` (its part of the Theory page)."""
    from .. import models

    part = models.get(model).part
    return [m.name for m in METRICS.values() if m.part in (0, part)]


def diagnostics_needed(names: Sequence[str]) -> tuple[str, ...]:
    """The diagnostics the metrics ``names`` read (the union of their ``needs``, in the
    order met): what a sweep's run computes (``simulate(..., diagnostics=…)``)."""
    return tuple(dict.fromkeys(d for n in names for d in METRICS[n].needs))


def trajectory_metrics(trajectory: Trajectory, names: Sequence[str]) -> dict[str, float]:
    """The metrics of a run (Part I and common ones; Part II ones are NaN here).

    Parameters
    ----------
    trajectory : Trajectory
        A run of :func:`~dynamics.simulate`.
    names : sequence of str
        Metric names (:data:`METRICS`).

    Returns
    -------
    dict of str to float
        NaN where the model does not define the diagnostic a metric reads.
    """
    diag, t = trajectory.diagnostics, trajectory.times
    out = {}
    nan = math.nan

    def series(key):
        return np.asarray(diag[key], dtype=float) if key in diag else None

    with np.errstate(all="ignore"):
        for name in names:
            value = nan
            if name == "kl_mean":
                kl = series("kl")
                if kl is not None and len(t) > 1 and t[-1] > t[0]:
                    value = float(np.trapezoid(kl, t) / (t[-1] - t[0]))
                elif kl is not None:
                    value = float(kl[0])
            elif name == "kl_final":
                kl = series("kl")
                value = float(kl[-1]) if kl is not None else nan
            elif name == "kl_ratio_max":
                kl, bound = series("kl"), series("kl_bound")
                if kl is not None and bound is not None and np.all(np.isfinite(bound)):
                    keep = bound > 0
                    ratio = kl[keep] / bound[keep]
                    value = float(ratio.max()) if ratio.size else nan
                    if np.any((bound == 0) & (kl > 0)):
                        value = math.inf
            elif name == "lag_amplitude":
                value = _lag_amplitude(trajectory)
            elif name == "dissipated":
                d = series("dissipated")
                value = float(d[-1]) if d is not None else nan
            elif name == "energy_residual_max":
                r = series("energy_residual")
                value = float(np.max(np.abs(r))) if r is not None else nan
            elif name == "diverged_at":
                value = nan if trajectory.diverged_at is None else float(trajectory.diverged_at)
            elif name == "t_final":
                value = float(t[-1])
            out[name] = value
    return out


def _lag_amplitude(trajectory: Trajectory) -> float:
    """``max_i osc(log A_i − log A*_i)`` over the second half of the recorded frames, with
    ``A* = rowsoftmax(β X M Xᵀ)`` (NaN for a model without attention)."""
    from .. import energy as en
    from ..simulation import Simulation

    if trajectory.attention is None:
        return math.nan
    values = trajectory.settings
    problem = Simulation(Settings(**values)).problem
    M, beta = getattr(problem, "M", None), values["beta"]
    if M is None:
        return math.nan
    start = len(trajectory.times) // 2
    worst = 0.0
    for A, X in zip(trajectory.attention[start:], trajectory.features[start:], strict=True):
        if not np.all(A > 0):
            return math.nan
        log_star = en.log_rowsoftmax(beta * en.scores(X, M))
        worst = max(worst, float(np.max(en.oscillation(np.log(A) - log_star))))
    return worst


def lab_metrics(values: Mapping, names: Sequence[str]) -> dict[str, float]:
    """The Part II metrics of the settings ``values`` (the inertial lab's experiments).

    ``blowup_time`` and ``first_order_blowup_time`` come from the lab's moment systems,
    ``crossing_layer`` and ``predicted_layer`` from its kick-damp-drift layers of step
    ``layer_h`` with threshold ``theta`` (Theory page, Part II). Infinite times and
    missing layers are NaN.
    """
    wanted = [n for n in names if METRICS[n].part == 2]
    if not wanted:
        return {}
    from .. import models

    if models.get(values["model"]).part != 2:
        return dict.fromkeys(wanted, math.nan)
    from ..inertial.experiments import T_LIMIT, blowup_times, lab_data, lab_settings
    from ..inertial.layers import layer_crossing

    s = lab_settings(dict(values))
    data = lab_data(s)
    out = {}
    if {"blowup_time", "first_order_blowup_time"} & set(wanted):
        first, accelerated = blowup_times(data)
        out["blowup_time"] = _finite_or_nan(accelerated)
        out["first_order_blowup_time"] = _finite_or_nan(first)
    if {"crossing_layer", "predicted_layer"} & set(wanted):
        crossing = layer_crossing(data.X0, data.A, data.V, s.layer_h, s.theta,
                                  scheme="kick_damp_drift", damping=data.damping,
                                  t_max=T_LIMIT)
        out["crossing_layer"] = math.nan if crossing.layer is None else float(crossing.layer)
        out["predicted_layer"] = (math.nan if crossing.predicted is None
                                  else float(crossing.predicted))
    return {n: out[n] for n in wanted}


def _finite_or_nan(x: float) -> float:
    x = float(x)
    return x if math.isfinite(x) else math.nan


def two_source_lag_amplitude(beta, gamma, omega, amplitude):
    """The log-odds lag amplitude ``β δ ω / √(λ² + ω²)``, ``λ = γ/β``, of one row with two
    sources whose score difference is ``δ sin(ωt)`` (Theory page: tracking the moving
    softmax). Broadcasts over arrays."""
    beta, gamma = np.asarray(beta, float), np.asarray(gamma, float)
    omega, amplitude = np.asarray(omega, float), np.asarray(amplitude, float)
    lam = gamma / beta
    return beta * amplitude * omega / np.sqrt(lam**2 + omega**2)
