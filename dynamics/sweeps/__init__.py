"""Parameter sweeps: one metric map over a grid of settings, run on ``dask.distributed``.

:func:`sweep` runs :func:`~dynamics.simulate` at every point of a grid of settings (the
base settings with the grid's values put in) and reduces each run to a few numbers, the
*metrics* (:data:`METRICS`). The result is an ``xarray.Dataset`` with one dimension per
swept setting, one variable per metric, a ``status`` and a ``message`` per point, and the
base settings as attributes.

A sweep runs in this process or on a ``dask.distributed`` cluster (an embedded
``LocalCluster`` sized to the machine, or any cluster a ``Client`` is connected to:
``dask scheduler`` and ``dask worker`` started by hand): its first point, run here, gives
the cost per point, and a small schedule model (:func:`predict_schedule`) says whether a
cluster, its start-up included, ends sooner (``where="auto"``; ``"local"`` and
``"cluster"`` force either). On a cluster the points go in tasks whose sizes follow the
number of workers and the cost per point (:func:`task_sizes`); an embedded cluster starts
while points keep running here. A point runs exactly as a plain ``simulate`` of the same
settings, so the result depends neither on where it runs nor on the batching. A point
that diverges, fails or raises is recorded as such (``status``, ``message``, NaN
metrics); it never stops the sweep. :class:`SweepRun` runs a sweep that can be watched
(a callback per finished batch) and cancelled; a task lost with a killed worker is rerun
by the scheduler.

The modules, from the bottom up: :mod:`~dynamics.sweeps.grid` (the grid's axes and
points), :mod:`~dynamics.sweeps.metrics` (what is kept of a run),
:mod:`~dynamics.sweeps.points` (a point or a task's batch of points, run),
:mod:`~dynamics.sweeps.schedule` (task sizes and the schedule model, with its constants),
:mod:`~dynamics.sweeps.cluster` (starting a cluster, tasks on it),
:mod:`~dynamics.sweeps.cache` and :mod:`~dynamics.sweeps.dataset` (the result and its
file), :mod:`~dynamics.sweeps.run` (:class:`SweepRun`), :mod:`~dynamics.sweeps.adaptive`
(:class:`AdaptiveRun`: the points chosen by ``adaptive``'s learners where the metric
changes fastest), :mod:`~dynamics.sweeps.front` (:func:`sweep`, :func:`adaptive_sweep`).

xarray is imported when a sweep runs, Dask only when it goes to a cluster, ``adaptive``
only when an adaptive sweep runs, so
``import dynamics`` stays fast and a small sweep starts at once.
"""

from .adaptive import (
    COVER,
    LOSSES,
    ROUND_SIZE,
    AdaptiveRun,
    check_ranges,
    cover_points,
    learning_value,
    parse_range,
)
from .cache import CACHE_ENV, cache_dir, cache_path, dask_kept_out, netcdf_bytes, sweep_key
from .cluster import QUIET_CLUSTER, running_client
from .front import adaptive_sweep, sweep
from .grid import check_grid, grid_points, parse_axis
from .metrics import (
    METRICS,
    Metric,
    default_metrics,
    lab_metrics,
    trajectory_metrics,
    two_source_lag_amplitude,
)
from .points import STATUSES, run_batch, run_point
from .run import WHERE, SweepRun
from .schedule import (
    Schedule,
    cluster_pays,
    free_cores,
    predict_schedule,
    split,
    task_sizes,
)

__all__ = ["CACHE_ENV", "COVER", "LOSSES", "METRICS", "QUIET_CLUSTER", "ROUND_SIZE", "STATUSES",
           "WHERE", "AdaptiveRun", "Metric", "Schedule", "SweepRun", "adaptive_sweep",
           "cache_dir", "cache_path", "check_grid", "check_ranges", "cluster_pays",
           "cover_points", "dask_kept_out", "default_metrics", "free_cores", "grid_points",
           "lab_metrics", "learning_value", "netcdf_bytes", "parse_axis", "parse_range",
           "predict_schedule", "run_batch", "run_point", "running_client", "split", "sweep",
           "sweep_key", "task_sizes", "trajectory_metrics", "two_source_lag_amplitude"]
