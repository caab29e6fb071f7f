"""Ensembles of noisy runs (Theory page: stochastic logits).

:func:`run_ensemble` runs ``K`` replicas of one setting, each a
:class:`~dynamics.simulation.Simulation` with its own noise stream (``replica = 0 … K−1``:
the children of one ``SeedSequence`` of the seed, :mod:`dynamics.noise`) and the same
initial data, and returns an :class:`Ensemble`: every replica's diagnostics on one time
grid, their mean and standard deviation, and the small-noise stationary prediction of the
KL lag as a reference.

The replicas are separate runs rather than one run vectorised along a leading axis: the
schemes of the coupled models (their carries, deferred work and sub-steps) are written for
one state, and a replica that diverges stops alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from .frame import RUNNING
from .models.multi_head import scores
from .noise import small_noise_kl, stationary_variance
from .settings import Settings
from .simulation import Simulation

#: The diagnostics an ensemble keeps by default (the ensemble view's bands).
ENSEMBLE_DIAGNOSTICS = ("kl", "free_energy", "dissipation_rate", "noise_work",
                        "energy_residual")
#: Most replicas of one ensemble.
MAX_REPLICAS = 4096


@dataclass(frozen=True)
class Ensemble:
    """``K`` replicas of one noisy run on one time grid.

    Attributes
    ----------
    settings : dict
        The settings of every replica.
    times : ndarray, shape (T,)
    diagnostics : dict of str to ndarray, shape (K, T)
        Each kept diagnostic per replica and frame (NaN after a replica stopped).
    prediction : ndarray, shape (T,)
        Small-noise stationary mean of ``Σ_i KL(A_i ‖ A*_i)``,
        ``½ s² Σ_i (1 − Σ_j A*_ij²)``, ``s² = σ²/(2λ)`` (summed over the heads when a layer
        runs with all its heads), with ``A*`` of each frame averaged over the replicas (a
        constant for features that do not move); NaN for a model that does not relax
        attention.
    final : tuple of Frame
        The last frame of every replica.
    statuses : tuple of str
        Each replica's final status.
    """

    settings: dict
    times: np.ndarray
    diagnostics: dict
    prediction: np.ndarray
    final: tuple
    statuses: tuple

    @property
    def replicas(self) -> int:
        """``K``."""
        return len(self.final)

    def mean(self, name: str) -> np.ndarray:
        """Mean over the replicas still running, shape (T,)."""
        return _reduce(np.nanmean, self.diagnostics[name])

    def std(self, name: str) -> np.ndarray:
        """Standard deviation over the replicas still running (``ddof = 1``), shape (T,)."""
        values = self.diagnostics[name]
        live = np.sum(np.isfinite(values), axis=0)
        out = np.full(values.shape[1], np.nan)
        ok = live > 1
        if np.any(ok):
            out[ok] = _reduce(lambda v, axis: np.nanstd(v, axis=axis, ddof=1), values[:, ok])
        return out


def _reduce(fn, values):
    if values.shape[0] == 0:
        return np.full(values.shape[1:], np.nan)
    with np.errstate(invalid="ignore"):
        return fn(values, axis=0)


def _prediction(sim, frame, s2) -> float:
    """The small-noise stationary KL of a frame: of its softmax, or summed over the heads
    when a layer runs with all its heads (the frame's ``kl`` sums over heads too)."""
    if frame.heads is None:
        return small_noise_kl(frame.softmax, s2)
    every_head = softmax(sim.problem.beta * scores(frame.features, sim.problem.M), axis=-1)
    return len(every_head) * small_noise_kl(every_head, s2)  # (A*_h stacked: it averages)


def run_ensemble(settings: Settings, replicas: int, t_end: float, every: int = 1,
                 names=ENSEMBLE_DIAGNOSTICS, progress=None) -> Ensemble:
    """Run ``replicas`` noisy replicas of ``settings`` to ``t_end``.

    Parameters
    ----------
    settings : Settings
        Copied: later changes do not reach the replicas.
    replicas : int
        ``K`` in ``[1, MAX_REPLICAS]``.
    t_end : float
        Final time (rounded to a whole number of steps of ``dt``).
    every : int
        Record every ``every``-th step.
    names : tuple of str
        Diagnostics to keep.
    progress : callable ``(done, total)``, optional
        Called after each replica.

    Returns
    -------
    Ensemble
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int | np.integer) \
            or not 1 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"replicas must be an integer in [1, {MAX_REPLICAS}], got {replicas!r}")
    if not (isinstance(t_end, int | float) and math.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive number, got {t_end!r}")
    if isinstance(every, bool) or not isinstance(every, int | np.integer) or every < 1:
        raise ValueError(f"every must be a positive integer, got {every!r}")
    values = settings.values()
    n_steps = max(1, round(t_end / values["dt"]))
    n_frames = n_steps // every + 1
    data = {name: np.full((replicas, n_frames), np.nan) for name in names}
    times = np.arange(n_frames) * (every * values["dt"])
    total = np.zeros(n_frames)  # Σ over replicas of the prediction, and how many
    count = np.zeros(n_frames)
    final, statuses = [], []
    for r in range(replicas):
        sim = Simulation(Settings(**values), replica=r)
        relaxes = "logit_noise" in sim.spec.reads()
        s2 = stationary_variance(sim.logit_noise, sim.problem.relaxation_rate) if relaxes \
            else math.nan
        frame = sim.frame()
        for k in range(n_frames):
            if k:
                if sim.status != RUNNING:
                    break  # stopped: the rest stays NaN
                frame = sim.step(every)
            for name in names:
                data[name][r, k] = frame.diagnostics.get(name, math.nan)
            if relaxes and frame.softmax is not None:
                total[k] += _prediction(sim, frame, s2)
                count[k] += 1
        final.append(frame)
        statuses.append(sim.status)
        if progress is not None:
            progress(r + 1, replicas)
    prediction = np.full(n_frames, np.nan)
    np.divide(total, count, out=prediction, where=count > 0)
    return Ensemble(settings=values, times=times, diagnostics=data, prediction=prediction,
                    final=tuple(final), statuses=tuple(statuses))


__all__ = ["ENSEMBLE_DIAGNOSTICS", "MAX_REPLICAS", "Ensemble", "run_ensemble"]
