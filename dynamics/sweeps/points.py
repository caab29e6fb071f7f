"""The points of a sweep, run: one (:func:`run_point`) or a task's batch of them
(:func:`run_batch`, stepped together where they can be), each reduced to its metrics and
a status. A point's failure is recorded with it, never raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ..settings import Settings
from ..trajectory import Trajectory, simulate
from .metrics import METRICS, diagnostics_needed, lab_metrics, trajectory_metrics

#: Status of a point: the run's own (``completed``, ``diverged``, ``failed``), ``error``
#: (its settings could not be built or its run raised) or ``cancelled`` (not run).
STATUSES = ("completed", "diverged", "failed", "error", "cancelled")

#: Most runs of a task stepped together by one ``simulate_batch`` call (their
#: trajectories are held at once: a task may have hundreds of points).
BATCH_RUNS = 16


def run_point(values: Mapping, t_end: float, metrics: Sequence[str], every: int = 1
              ) -> dict:
    """One grid point: ``simulate(Settings(**values), t_end, every)`` and its metrics;
    the run computes only the diagnostics they read (:func:`diagnostics_needed`), each
    equal to the full run's.

    Returns
    -------
    dict
        ``{"status": …, "message": …, metric: float, …}``. A run that raises (settings
        that cannot be built, an error inside the run) has status ``error``, its message,
        and NaN metrics; it does not raise.
    """
    needed = diagnostics_needed(metrics)
    return _measure(values, metrics, lambda s: simulate(s, t_end=t_end, every=every,
                                                        diagnostics=needed))


def _measure(values: Mapping, metrics: Sequence[str],
             run: Callable[[Settings], Trajectory]) -> dict:
    """:func:`run_point`'s result, the trajectory given by ``run(settings)``."""
    result = dict.fromkeys(metrics, math.nan)
    try:
        settings = Settings(**values)
        trajectory = run(settings)
        result.update(trajectory_metrics(trajectory, [m for m in metrics
                                                      if METRICS[m].part != 2]))
        status = {"running": "completed"}.get(trajectory.status, trajectory.status)
        message = trajectory.message
        result.update(lab_metrics(values, metrics))
    except Exception as err:  # recorded, never raised: a sweep goes on
        status, message = "error", f"{type(err).__name__}: {err}"
    result["status"], result["message"] = status, message
    return result


def run_batch(batch: Sequence[tuple[tuple[int, ...], dict]], t_end: float,
              metrics: Sequence[str], every: int = 1) -> list[tuple[tuple[int, ...], dict]]:
    """Run a batch of points (one dask task): ``[(index, run_point(...)), …]``.

    Points whose runs :func:`~dynamics.batch.simulate_batch` steps together (grouped by
    the sizes and step they must share and by branch, plain or stiff, at most
    :data:`BATCH_RUNS` at a time) are run
    that way; its trajectories equal those of ``simulate`` (with the diagnostics the
    metrics read, as :func:`run_point`'s), so the results are :func:`run_point`'s. A
    group whose batched run raises is run point by point, where each error is recorded
    with its point.
    """
    from ..batch import batchable, simulate_batch, stiff

    groups: dict[tuple, list[tuple[int, Settings]]] = {}
    for k, (_, values) in enumerate(batch):
        try:
            settings = Settings(**values)
        except Exception:  # recorded by _measure, below
            continue
        if batchable(settings):  # stiff runs apart: each batch steps one branch
            key = (settings.n_tokens, settings.dim, settings.dt, stiff(settings))
            groups.setdefault(key, []).append((k, settings))
    results: dict[int, dict] = {}
    needed = diagnostics_needed(metrics)
    for members in groups.values():
        # at most BATCH_RUNS trajectories held at once, each measured as it is taken
        for start in range(0, len(members), BATCH_RUNS):
            chunk = members[start:start + BATCH_RUNS]
            if len(chunk) < 2:
                continue
            try:
                runs = simulate_batch([s for _, s in chunk], t_end, every, needed)
            except Exception:
                continue
            for (k, _), trajectory in zip(chunk, runs, strict=True):
                results[k] = _measure(batch[k][1], metrics,
                                      lambda settings, t=trajectory: t)
            del runs

    def measured(k, values):
        if k in results:
            return results.pop(k)
        return _measure(values, metrics, lambda s: simulate(s, t_end=t_end, every=every,
                                                            diagnostics=needed))

    return [(index, measured(k, values)) for k, (index, values) in enumerate(batch)]
