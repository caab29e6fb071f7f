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

xarray is imported when a sweep runs, Dask only when it goes to a cluster, so
``import dynamics`` stays fast and a small sweep starts at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import param

from .settings import Settings
from .trajectory import Trajectory, simulate


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
    """

    name: str
    doc: str
    part: int


#: Every metric, by name.
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("kl_mean", "time average of the lag Σ_i KL(A_i‖A*_i) over the run "
           "(trapezoid over the recorded frames)", 1),
    Metric("kl_final", "the lag Σ_i KL(A_i‖A*_i) at the last frame", 1),
    Metric("kl_ratio_max", "maximum of kl / kl_bound, the lag over its tracking bound "
           "(≤ 1 where the bound holds; frames with kl_bound = 0 left out)", 1),
    Metric("lag_amplitude", "maximum over rows and over the second half of the run of the "
           "log-odds lag osc(log A_i − log A*_i) (tracking the moving softmax)", 1),
    Metric("dissipated", "energy dissipated ∫D dt at the last frame", 1),
    Metric("energy_residual_max", "maximum of |energy_residual| over the run (zero up to "
           "integrator error)", 1),
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

#: Status of a point: the run's own (``completed``, ``diverged``, ``failed``), ``error``
#: (its settings could not be built or its run raised) or ``cancelled`` (not run).
STATUSES = ("completed", "diverged", "failed", "error", "cancelled")

#: Where :func:`cache_path` keeps finished sweeps (overridden by the environment variable
#: ``ATTENTION_DYNAMICS_CACHE``).
CACHE_ENV = "ATTENTION_DYNAMICS_CACHE"


#: Tasks per worker thread of :func:`split` (the tasks of a sweep when the cost per point
#: is not known): enough for the last tasks to even out the workers, few enough for the
#: scheduling to stay a small cost.
TASKS_PER_THREAD = 4

#: Where a sweep runs: ``auto`` (chosen from its estimated cost, :meth:`SweepRun.run`),
#: ``local`` (in this process, one task after the other) or ``cluster`` (dask).
WHERE = ("auto", "local", "cluster")

#: Seconds an embedded ``LocalCluster`` takes to be ready, its workers' first imports
#: included (measured ≈ 1.9 s for two worker processes on 2 cores, issue #32).
CLUSTER_STARTUP_S = 2.5

#: Seconds a running cluster (a ``Client`` given) adds before its first result: the
#: round trip of the first tasks and, on fresh workers, their first imports.
CLIENT_STARTUP_S = 0.3

#: Seconds of scheduling per task (submit, schedule, return a result): a few
#: milliseconds on ``dask.distributed``, counted by the schedule model.
TASK_OVERHEAD_S = 0.005

#: Shortest task worth its scheduling, in estimated seconds of points.
MIN_TASK_S = 0.1

#: Task sizes decrease as ``⌈remaining / (GUIDED · threads)⌉`` (guided self-scheduling):
#: the first tasks are large, the last ones small enough that no worker idles long at
#: the end.
GUIDED = 2

#: Seconds a chunk of points run in this process lasts (estimated) while a cluster starts:
#: short enough for the cluster to take over soon after it is ready.
LOCAL_CHUNK_S = 0.5

#: Most runs of a task stepped together by one ``simulate_batch`` call (their
#: trajectories are held at once: a task may have hundreds of points).
BATCH_RUNS = 16

#: ``LocalCluster`` options of an embedded cluster: no dashboard, and the scheduler's small
#: HTTP server (health, metrics) on a free port rather than 8787.
QUIET_CLUSTER = {"dashboard_address": None, "scheduler_kwargs": {"dashboard_address": ":0"}}


def default_metrics(model: str) -> list[str]:
    """The metrics that mean something for ``model`` (its part of the Theory page)."""
    from . import models

    part = models.get(model).part
    return [m.name for m in METRICS.values() if m.part in (0, part)]


# -- the grid -------------------------------------------------------------------------
def parse_axis(text: str) -> tuple[str, list]:
    """One grid axis from its command-line form.

    ``name=lo:hi:log:n`` (``n`` values spaced evenly in ``log``), ``name=lo:hi:lin:n``
    (or ``lo:hi:n``), or ``name=v1,v2,…`` (numbers or words, e.g. ``path=rotation,drift``).

    Returns
    -------
    name : str
        The setting (dashes read as underscores).
    values : list
        Floats, ints for an integer setting, strings for a choice or text setting.

    Raises
    ------
    ValueError
        Malformed text, or an unknown setting.
    """
    name, sep, spec = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name or not spec.strip():
        raise ValueError(f"grid axis must read name=lo:hi:log:n, name=lo:hi:n or "
                         f"name=v1,v2,…, got {text!r}")
    if name not in Settings.names():
        raise ValueError(f"grid axis {text!r}: unknown setting {name!r}")
    parts = [p.strip() for p in spec.split(":")]
    p = Settings.param[name]
    numeric = isinstance(p, param.Number)
    if len(parts) == 1:
        words = [w.strip() for w in spec.split(",")]
        if numeric:
            try:
                values = [float(w) for w in words]
            except ValueError:
                raise ValueError(f"grid axis {text!r}: {name} takes numbers") from None
        else:
            values = words
    elif len(parts) in (3, 4) and numeric:
        scale = parts[2] if len(parts) == 4 else "lin"
        try:
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[-1])
        except ValueError:
            raise ValueError(f"grid axis {text!r}: lo and hi must be numbers and n an "
                             "integer") from None
        if n < 1:
            raise ValueError(f"grid axis {text!r}: n must be at least 1")
        if scale == "log":
            if lo <= 0 or hi <= 0:
                raise ValueError(f"grid axis {text!r}: a log axis needs lo, hi > 0")
            values = np.geomspace(lo, hi, n).tolist()
        elif scale == "lin":
            values = np.linspace(lo, hi, n).tolist()
        else:
            raise ValueError(f"grid axis {text!r}: spacing must be log or lin, got {scale!r}")
    else:
        raise ValueError(f"grid axis must read name=lo:hi:log:n, name=lo:hi:n or "
                         f"name=v1,v2,… (ranges for numeric settings only), got {text!r}")
    if isinstance(p, param.Integer):
        values = [int(round(v)) for v in values]
    return name, values


def check_grid(settings: Settings, grid: Mapping[str, Sequence]) -> dict[str, list]:
    """The grid with every value checked against its setting's bounds.

    Parameters
    ----------
    settings : Settings
        The base settings (not changed).
    grid : mapping of str to sequence
        ``{setting: values}``, one axis per setting, in order.

    Returns
    -------
    dict of str to list
        The values converted to the setting's type (a number given for a text setting
        such as ``value_diag`` becomes its text).

    Raises
    ------
    ValueError
        An empty grid or axis, an unknown setting, a repeated value, or a value out of
        bounds (every problem listed, each naming the setting).
    """
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("grid must be a non-empty mapping {setting: [values]}")
    out, problems = {}, []
    names = Settings.names()
    for name, raw in grid.items():
        if name not in names:
            problems.append(f"grid: unknown setting {name!r}")
            continue
        values = [raw] if isinstance(raw, str) else list(np.asarray(raw, dtype=object).ravel())
        if not values:
            problems.append(f"grid: {name} has no values")
            continue
        p = Settings.param[name]
        converted = []
        for v in values:
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(p, param.String) and isinstance(v, int | float) \
                    and not isinstance(v, bool):
                v = repr(float(v))
            checked, errors = Settings.check({name: v})
            if errors:
                problems += [f"grid value {v!r} of {name}: {e}" for e in errors]
            else:
                converted.append(checked[name])
        if len(set(converted)) != len(converted):
            problems.append(f"grid: {name} repeats a value")
        out[name] = converted
    if problems:
        raise ValueError("; ".join(problems))
    return out


def grid_points(grid: Mapping[str, list]) -> list[tuple[tuple[int, ...], dict]]:
    """Every point of the grid, in C order: ``(index, {setting: value})``."""
    names = list(grid)
    ranges = [range(len(grid[n])) for n in names]
    return [(idx, {n: grid[n][i] for n, i in zip(names, idx, strict=True)})
            for idx in itertools.product(*ranges)]


# -- one point ------------------------------------------------------------------------
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
    from . import energy as en
    from .simulation import Simulation

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
    from . import models

    if models.get(values["model"]).part != 2:
        return dict.fromkeys(wanted, math.nan)
    from .inertial.experiments import T_LIMIT, blowup_times, lab_data, lab_settings
    from .inertial.layers import layer_crossing

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


def run_point(values: Mapping, t_end: float, metrics: Sequence[str], every: int = 1
              ) -> dict:
    """One grid point: ``simulate(Settings(**values), t_end, every)`` and its metrics.

    Returns
    -------
    dict
        ``{"status": …, "message": …, metric: float, …}``. A run that raises (settings
        that cannot be built, an error inside the run) has status ``error``, its message,
        and NaN metrics; it does not raise.
    """
    return _measure(values, metrics, lambda s: simulate(s, t_end=t_end, every=every))


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
    the sizes and step they must share, at most :data:`BATCH_RUNS` at a time) are run
    that way; its trajectories equal those of ``simulate``, so the results are
    :func:`run_point`'s. A group whose batched run
    raises is run point by point, where each error is recorded with its point.
    """
    from .batch import batchable, simulate_batch

    groups: dict[tuple, list[tuple[int, Settings]]] = {}
    for k, (_, values) in enumerate(batch):
        try:
            settings = Settings(**values)
        except Exception:  # recorded by _measure, below
            continue
        if batchable(settings):
            groups.setdefault((settings.n_tokens, settings.dim, settings.dt), []).append(
                (k, settings))
    results: dict[int, dict] = {}
    for members in groups.values():
        # at most BATCH_RUNS trajectories held at once, each measured as it is taken
        for start in range(0, len(members), BATCH_RUNS):
            chunk = members[start:start + BATCH_RUNS]
            if len(chunk) < 2:
                continue
            try:
                runs = simulate_batch([s for _, s in chunk], t_end, every)
            except Exception:
                continue
            for (k, _), trajectory in zip(chunk, runs, strict=True):
                results[k] = _measure(batch[k][1], metrics,
                                      lambda settings, t=trajectory: t)
            del runs

    def measured(k, values):
        if k in results:
            return results.pop(k)
        return _measure(values, metrics, lambda s: simulate(s, t_end=t_end, every=every))

    return [(index, measured(k, values)) for k, (index, values) in enumerate(batch)]


def split(points: Sequence, threads: int, batch_size: int | None = None) -> list[list]:
    """The tasks of a sweep: ``points`` in batches of ``batch_size`` (by default about
    :data:`TASKS_PER_THREAD` batches per worker thread), each of every n-th point.

    Interleaved, not consecutive: neighbouring grid points cost alike (a stiff row of the
    grid is slow throughout), so a batch of every n-th point balances the workers.
    """
    size = batch_size or max(1, math.ceil(len(points) / (TASKS_PER_THREAD * threads)))
    n_batches = math.ceil(len(points) / size)
    return [list(points[i::n_batches]) for i in range(n_batches)]


def task_sizes(n_points: int, threads: int, cost: float | None = None,
               batch_size: int | None = None) -> list[int]:
    """Points per task, in the order the tasks are handed out.

    Guided self-scheduling: each task takes ``⌈remaining / (GUIDED · threads)⌉`` points,
    so the first tasks are large (few tasks, little scheduling) and the last ones small
    (the workers finish together); no task is estimated shorter than :data:`MIN_TASK_S`
    (``cost`` seconds per point). ``batch_size`` fixes every size instead.

    Parameters
    ----------
    n_points : int
    threads : int
        Worker threads of the cluster.
    cost : float, optional
        Estimated seconds per point (unknown: no lower bound on a task's size).
    batch_size : int, optional
        Points per task, given by the user.

    Returns
    -------
    list of int
        Positive sizes summing to ``n_points``.
    """
    if batch_size:
        return [batch_size] * (n_points // batch_size) + [n_points % batch_size] * bool(
            n_points % batch_size)
    smallest = max(1, math.ceil(MIN_TASK_S / cost)) if cost and cost > 0 else 1
    sizes, left = [], n_points
    while left > 0:
        size = min(left, max(smallest, math.ceil(left / (GUIDED * max(threads, 1)))))
        sizes.append(size)
        left -= size
    return sizes


@dataclass(frozen=True)
class Schedule:
    """What :func:`predict_schedule` predicts.

    Attributes
    ----------
    makespan : float
        Seconds from the start of the sweep to its last result.
    efficiency : float
        Seconds of points over the seconds the workers were there (from each one's start
        to the makespan): 1 when no worker ever waits or schedules.
    finish : tuple of float
        When each worker ran out of tasks.
    """

    makespan: float
    efficiency: float
    finish: tuple[float, ...]


def predict_schedule(sizes: Sequence[int], cost, workers: int, startup=0.0,
                     overhead: float = TASK_OVERHEAD_S) -> Schedule:
    """The schedule of a sweep's tasks on ``workers`` single-threaded workers.

    Each task, in order, goes to the first worker free (as ``dask.distributed`` hands out
    queued tasks); it costs ``overhead`` plus the cost of its points.

    Parameters
    ----------
    sizes : sequence of int
        Points per task (:func:`task_sizes`), in the order handed out.
    cost : float or sequence of float
        Seconds per point: one for all, or one per point in task order (length
        ``sum(sizes)``).
    workers : int
    startup : float or sequence of float
        When the workers are ready: one time for all, or one per worker (staggered
        starts).
    overhead : float
        Seconds of scheduling per task.

    Returns
    -------
    Schedule
    """
    import heapq

    n = int(sum(sizes))
    costs = np.broadcast_to(np.asarray(cost, dtype=float), (n,))
    ready = np.broadcast_to(np.asarray(startup, dtype=float), (workers,))
    free = [(float(t), w) for w, t in enumerate(ready)]
    heapq.heapify(free)
    finish = list(map(float, ready))
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    for lo, hi in itertools.pairwise(edges):
        t, w = heapq.heappop(free)
        t += overhead + float(costs[lo:hi].sum())
        finish[w] = t
        heapq.heappush(free, (t, w))
    makespan = max(finish)
    present = float(np.sum(makespan - ready))
    return Schedule(makespan, float(costs.sum()) / present if present > 0 else 1.0,
                    tuple(finish))


def running_client():
    """The process's default ``distributed.Client`` (one a user made, e.g. in a notebook)
    if it is running, else None; never imports ``distributed`` (without it no client can
    exist)."""
    if sys.modules.get("distributed") is None:
        return None
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:  # no default client
        return None
    return client if client.status == "running" else None


def free_cores() -> int:
    """Cores of this machine that other processes leave free: the core count less the
    load average of the last minute (this process's own share of it, one core, counted
    as free); at least 1. On a busy machine more worker processes only share the same
    cores, and their start-up costs the points running here."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return cores
    return max(1, min(cores, int(cores - max(load - 1.0, 0.0) + 0.5)))


def cluster_pays(n_points: int, cost: float, threads: int, startup: float) -> bool:
    """Whether ``n_points`` of ``cost`` seconds each end sooner on ``threads`` workers
    ready after ``startup`` seconds (:func:`predict_schedule` of :func:`task_sizes`)
    than one after the other in this process."""
    if threads < 2 or n_points < 2:
        return False
    sizes = task_sizes(n_points, threads, cost)
    return predict_schedule(sizes, cost, threads, startup).makespan < n_points * cost


# -- the sweep ------------------------------------------------------------------------
def cache_dir() -> str:
    """The folder of cached sweeps: ``$ATTENTION_DYNAMICS_CACHE``, else
    ``$XDG_CACHE_HOME/attention-dynamics/sweeps`` (``~/.cache/…`` by default)."""
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "attention-dynamics", "sweeps")


def sweep_key(base: Mapping, grid: Mapping, t_end: float, metrics: Sequence[str],
              every: int) -> str:
    """A SHA-256 of everything that fixes a sweep's result (and the package version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("attention-dynamics")
    except PackageNotFoundError:
        release = "unknown"
    blob = json.dumps({"base": dict(base), "grid": {k: list(v) for k, v in grid.items()},
                       "t_end": float(t_end), "metrics": list(metrics), "every": int(every),
                       "version": release}, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def dask_kept_out():
    """While active, ``import dask`` and ``import distributed`` raise ``ImportError``
    (nothing changes where Dask is imported already).

    For a process that has no use for Dask after its sweep ran here (the command line):
    xarray imports ``dask.array`` to build any Dataset where Dask is installed (a few
    tenths of a second of a small sweep's start-up), and remembers Dask as missing for
    the rest of the process.
    """
    if "dask" in sys.modules:
        yield
        return
    blocked = [name for name in ("dask", "distributed") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def netcdf_bytes(ds) -> bytes:
    """``ds.to_netcdf(engine="scipy")`` as bytes, without importing ``dask.distributed``.

    xarray asks dask for a distributed client before it writes; in a process that has not
    imported ``distributed`` there is none, and the import alone (about 0.6 s) would
    double the start-up of a small sweep. It is kept out while the file is written.
    """
    if "distributed" in sys.modules:
        return bytes(ds.to_netcdf(engine="scipy"))
    sys.modules["distributed"] = None  # an import of it raises ImportError: no client
    try:
        return bytes(ds.to_netcdf(engine="scipy"))
    finally:
        if "distributed" in sys.modules and sys.modules["distributed"] is None:
            del sys.modules["distributed"]


def cache_path(key: str) -> str:
    """The NetCDF file of the sweep with key ``key`` (:func:`sweep_key`)."""
    return os.path.join(cache_dir(), f"{key}.nc")


class SweepRun:
    """A sweep that can be watched and cancelled.

    Parameters
    ----------
    settings : Settings or mapping, optional
        The base settings (defaults for the others); the grid's values replace theirs.
    grid : mapping of str to sequence
        ``{setting: values}``; every value is checked before anything runs.
    t_end : float
        Final time of every run.
    metrics : sequence of str, optional
        Names from :data:`METRICS`; by default those of the model's part
        (:func:`default_metrics`).
    client : distributed.Client or callable, optional
        Run on its cluster (already started: no start-up to pay), or a callable
        returning a ``Client``, called only if the sweep goes to a cluster (in a thread,
        while points run here); by default an embedded ``LocalCluster`` with
        ``workers`` single-threaded workers is started and closed when one pays.
    every : int
        Record every ``every``-th step (the metrics read the recorded frames).
    batch_size : int, optional
        Points per task; by default about :data:`TASKS_PER_THREAD` tasks per worker
        thread, each of every n-th point of the grid.
    workers : int, optional
        Workers of the embedded cluster (default: the machine's cores).
    processes : bool
        The embedded cluster's workers are processes (True) or threads.
    on_batch : callable, optional
        Called as ``on_batch(results, done, total)`` after each finished batch, with
        ``results`` a list of ``(index, point_result)`` (from the thread calling
        :meth:`run`).
    cache : bool
        Read and write finished sweeps in :func:`cache_dir`.
    where : {"auto", "local", "cluster"}
        ``local``: every point in this process; ``cluster``: on the cluster (the
        client's, else an embedded one), points running here only while it starts;
        ``auto``: the sooner of the two by the estimated cost (:meth:`run`). The result
        is the same, bit for bit.

    Attributes
    ----------
    done, total : int
        Points finished so far and in all.
    cached : bool
        The last :meth:`run` read its result from the cache.
    ran_on : str or None
        Where the last :meth:`run` ran: ``local``, ``cluster`` or ``cache``.
    local_points : int
        Points of the last :meth:`run` run in this process.
    cost : float or None
        Seconds the first point took here (the estimated cost per point).
    """

    def __init__(self, settings: Settings | Mapping | None = None, grid: Mapping | None = None,
                 t_end: float = 10.0, metrics: Sequence[str] | None = None, client=None, *,
                 every: int = 1, batch_size: int | None = None, workers: int | None = None,
                 processes: bool = True, on_batch: Callable | None = None,
                 cache: bool = False, where: str = "auto"):
        if settings is None:
            settings = Settings()
        elif not isinstance(settings, Settings):
            settings = Settings(**dict(settings))
        self.base = settings.values()
        self.grid = check_grid(settings, grid if grid is not None else {})
        if not (np.isfinite(t_end) and t_end > 0):
            raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
        if int(every) != every or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        models = self.grid.get("model", [self.base["model"]])
        if metrics is None:
            metrics = list(dict.fromkeys(m for model in models for m in default_metrics(model)))
        elif isinstance(metrics, str):
            metrics = [metrics]
        unknown = [m for m in metrics if m not in METRICS]
        if unknown or not metrics:
            raise ValueError(f"metrics must be among {', '.join(METRICS)}, got "
                             f"{', '.join(map(repr, unknown)) or 'none'}")
        if batch_size is not None and (int(batch_size) != batch_size or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if workers is not None and (int(workers) != workers or workers < 1):
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        if where not in WHERE:
            raise ValueError(f"where must be one of {', '.join(WHERE)}, got {where!r}")
        self.t_end, self.every, self.metrics = float(t_end), int(every), list(metrics)
        self.client, self.batch_size, self.workers = client, batch_size, workers
        self.processes, self.on_batch, self.cache = processes, on_batch, cache
        self.points = grid_points(self.grid)
        self.total, self.done, self.cached = len(self.points), 0, False
        self.where, self.ran_on, self.local_points, self.cost = where, None, 0, None
        #: the first point runs here to measure the cost per point; False with a running
        #: cluster and ``where="cluster"``: every point runs there (cancellable)
        self.probe = True
        self._cancel = threading.Event()
        self._futures: list = []
        self._client = None
        self.results: dict[tuple[int, ...], dict] = {}

    @property
    def key(self) -> str:
        """The cache key of this sweep (:func:`sweep_key`)."""
        return sweep_key(self.base, self.grid, self.t_end, self.metrics, self.every)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop the sweep: pending tasks are cancelled, :meth:`run` returns what finished
        (the other points with status ``cancelled``). Safe from any thread."""
        self._cancel.set()
        client, futures = self._client, list(self._futures)
        if client is not None and futures:
            try:
                client.cancel(futures)
            except Exception:  # the cluster may be closing already
                pass

    def point_settings(self, index: tuple[int, ...]) -> Settings:
        """The settings of the grid point ``index``."""
        values = {n: self.grid[n][i] for n, i in zip(self.grid, index, strict=True)}
        return Settings(**{**self.base, **values})

    def run(self, keep_dask_out: bool = False):
        """Run the sweep (blocking) and return its ``xarray.Dataset``.

        ``keep_dask_out``: where Dask is not imported when the points are done (they ran
        here), build the result and the cache file without importing it
        (:func:`dask_kept_out`: for a process that ends after the sweep).

        Where it runs (``where``): one point first runs here, its time the estimated
        cost per point; with ``auto`` the rest stays here unless the schedule model
        (:func:`cluster_pays`) predicts that a cluster ends sooner, its start-up included
        (:data:`CLUSTER_STARTUP_S` for an embedded one, :data:`CLIENT_STARTUP_S` for a
        running one given as ``client``). An embedded cluster starts in a thread while
        points keep running here, and takes the rest of the points when it is ready, in
        tasks of :func:`task_sizes`. ``ran_on`` says where it ran.
        """
        self.local_points, self.ran_on = 0, "local"
        def light():
            return dask_kept_out() if keep_dask_out else contextlib.nullcontext()

        if self.cache:
            path = cache_path(self.key)
            if os.path.exists(path):
                with light():
                    import xarray as xr

                    with xr.open_dataset(path, engine="scipy") as ds:
                        result = ds.load()
                self.done, self.cached, self.ran_on = self.total, True, "cache"
                if self.on_batch is not None:
                    self.on_batch(_results_of(result, self), self.total, self.total)
                return result
        self._execute()
        with light():
            result = self.dataset()
            if self.cache and not self.cancelled:
                from .trajectory import _write_atomically

                os.makedirs(cache_dir(), exist_ok=True)
                _write_atomically(cache_path(self.key), netcdf_bytes(result))
        return result

    def _execute(self) -> None:
        # a fixed shuffle: neighbouring grid points cost alike (a stiff corner is slow
        # throughout), so any run of consecutive points is a fair sample of the grid
        order = np.random.default_rng(0).permutation(len(self.points))
        queue = deque((self.points[k][0], {**self.base, **self.points[k][1]}) for k in order)
        if self.client is None and self.where != "local":
            self.client = running_client()  # a client made in this process is reused
        if not self.probe and self.where == "cluster" and hasattr(self.client, "submit"):
            # no probe (the dashboard's tab): every point goes to the running cluster,
            # none runs here, where a cancel could not stop it (on a worker it is stopped
            # with its worker); the tasks are sized without a measured cost
            self.ran_on = "cluster"
            self._run_on(self.client, list(queue))
            return
        starter = _ClusterStarter(self) if self.where == "cluster" else None
        try:
            t0 = time.perf_counter()
            self._run_here(queue, 1)  # the probe: the cost per point
            self.cost = time.perf_counter() - t0
            if self.where == "auto" and queue and not self.cancelled:
                threads, startup = self._prospect()
                if cluster_pays(len(queue), self.cost, threads, startup):
                    starter = _ClusterStarter(self)
            if starter is not None:
                chunk = max(1, min(BATCH_RUNS, int(LOCAL_CHUNK_S / max(self.cost, 1e-9))))
                while queue and not self.cancelled and not starter.ready.is_set():
                    self._run_here(queue, chunk)
                if not queue or self.cancelled:
                    return
                try:
                    client = starter.client()
                except Exception:
                    if self.where == "cluster":
                        raise
                else:  # auto: a cluster that does not start leaves the points here
                    self.ran_on = "cluster"
                    self._run_on(client, list(queue))
                    return
            while queue and not self.cancelled:
                self._run_here(queue, BATCH_RUNS)
        finally:
            if starter is not None:
                starter.close()

    def _prospect(self) -> tuple[int, float]:
        """Worker threads and start-up seconds of the cluster a sweep would run on (an
        embedded one: as many workers as cores are free, :func:`free_cores`)."""
        if self.client is not None and hasattr(self.client, "submit"):
            return sum(self.client.nthreads().values()), CLIENT_STARTUP_S
        workers = self.workers or os.cpu_count() or 1
        if self.client is None:
            workers = min(workers, free_cores())
        return workers, CLUSTER_STARTUP_S

    def _record(self, results: list) -> None:
        for idx, res in results:
            self.results[idx] = res
        self.done += len(results)
        if self.on_batch is not None:
            self.on_batch(results, self.done, self.total)

    def _run_here(self, queue: deque, n: int) -> None:
        """Run the next ``n`` points of ``queue`` in this process."""
        batch = [queue.popleft() for _ in range(min(n, len(queue)))]
        results = run_batch(batch, self.t_end, self.metrics, self.every)
        self.local_points += len(results)
        self._record(results)

    def _run_on(self, client, points: list) -> None:
        """Run ``points`` on ``client``'s cluster, in tasks of :func:`task_sizes`."""
        from distributed import as_completed

        threads = sum(client.nthreads().values()) or 1
        sizes = task_sizes(len(points), threads, self.cost, self.batch_size)
        edges = np.cumsum([0, *sizes])
        batches = [points[lo:hi] for lo, hi in itertools.pairwise(edges)]
        self._client = client
        if self._cancel.is_set():
            return
        # the large tasks first (their priority the highest), the small ones to finish
        self._futures = [client.submit(run_batch, batch, self.t_end, self.metrics, self.every,
                                       pure=False, priority=len(batches) - k)
                         for k, batch in enumerate(batches)]
        if self._cancel.is_set():  # cancelled while submitting
            self.cancel()
        try:
            for future in as_completed(self._futures, loop=client.loop):
                if future.cancelled() or self._cancel.is_set():
                    continue
                if future.status == "error":  # a task that could not run at all
                    err = future.exception()
                    batch = batches[self._futures.index(future)]
                    results = [(idx, {**dict.fromkeys(self.metrics, math.nan),
                                      "status": "error",
                                      "message": f"{type(err).__name__}: {err}"})
                               for idx, _ in batch]
                else:
                    results = future.result()
                self._record(results)
        finally:
            self._futures, self._client = [], None

    def dataset(self):
        """The results so far as an ``xarray.Dataset`` (points not run: ``cancelled``)."""
        import xarray as xr

        dims = list(self.grid)
        shape = tuple(len(v) for v in self.grid.values())
        data = {m: np.full(shape, np.nan) for m in self.metrics}
        status = np.full(shape, "cancelled", dtype=object)
        message = np.full(shape, "", dtype=object)
        for idx, res in self.results.items():
            for m in self.metrics:
                data[m][idx] = res[m]
            status[idx], message[idx] = res["status"], res["message"]
        variables = {m: (dims, v, {"doc": METRICS[m].doc}) for m, v in data.items()}
        variables["status"] = (dims, status, {"doc": "completed, diverged, failed, error "
                                                     "or cancelled"})
        variables["message"] = (dims, message, {"doc": "why the run stopped, if it did"})
        attrs = {f"setting_{k}": (int(v) if isinstance(v, bool) else v)
                 for k, v in self.base.items() if k not in self.grid}
        attrs.update(t_end=self.t_end, every=self.every, swept=", ".join(dims),
                     metrics=", ".join(self.metrics))
        coords = {n: _coordinate(v) for n, v in self.grid.items()}
        return xr.Dataset(variables, coords=coords, attrs=attrs)


class _ClusterStarter:
    """The cluster of a sweep, made ready in a thread of its own while points run here.

    A ``Client`` given is ready at once; a callable is called, or an embedded
    ``LocalCluster`` started, in the thread. :meth:`close` closes what was started here.
    """

    def __init__(self, run: SweepRun):
        self.ready = threading.Event()
        self._client, self._error, self._owned = None, None, []
        if run.client is not None and hasattr(run.client, "submit"):
            self._client = run.client
            self.ready.set()
            return
        threading.Thread(target=self._start, args=(run.client, run.workers, run.processes),
                         daemon=True, name="sweep-cluster-start").start()

    def _start(self, factory, workers, processes) -> None:
        try:
            if factory is not None:
                self._client = factory()
            else:
                from distributed import Client, LocalCluster

                cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1,
                                       threads_per_worker=1, processes=processes,
                                       **QUIET_CLUSTER)
                self._owned.append(cluster)
                self._client = Client(cluster, set_as_default=False)
                self._owned.append(self._client)
        except Exception as err:  # raised by client(), in the sweep's thread
            self._error = err
        finally:
            self.ready.set()

    def client(self):
        """The ready ``Client`` (waits for it; re-raises why it could not start)."""
        self.ready.wait()
        if self._error is not None:
            raise self._error
        return self._client

    def close(self) -> None:
        """Close what was started here (once started: a start is not interrupted)."""
        self.ready.wait()
        for thing in reversed(self._owned):
            thing.close()


def _coordinate(values: list) -> np.ndarray:
    """A dimension's coordinate: numbers as floats (also the one-number texts of
    ``kernel_diag`` and ``value_diag``), other words as strings."""
    try:
        return np.array([float(v) for v in values])
    except (TypeError, ValueError):
        return np.asarray(values, dtype=object)


def _results_of(ds, run: SweepRun) -> list:
    """``[(index, point_result)]`` of a finished sweep's dataset (a cache hit)."""
    out = []
    for idx, _ in run.points:
        res = {m: float(ds[m].values[idx]) for m in run.metrics}
        res["status"], res["message"] = str(ds["status"].values[idx]), \
            str(ds["message"].values[idx])
        run.results[idx] = res
        out.append((idx, res))
    return out


def sweep(settings: Settings | Mapping | None = None, grid: Mapping | None = None,
          t_end: float = 10.0, metrics: Sequence[str] | None = None, client=None, **options):
    """Run ``settings`` at every point of ``grid`` and keep a few metrics of each run.

    Parameters
    ----------
    settings : Settings or mapping, optional
        The base settings; the grid's values replace theirs.
    grid : mapping of str to sequence
        ``{"beta": [...], "gamma": [...]}``: one dimension per setting. Every value is
        checked against its setting's bounds before anything runs.
    t_end : float
        Final time of every run.
    metrics : sequence of str, optional
        Names from :data:`METRICS` (default: those of the model's part).
    client : distributed.Client, optional
        Run on an existing cluster; by default on an embedded ``LocalCluster`` sized to
        the machine when a cluster pays (``where``), whose worker processes are spawned:
        a script calling ``sweep`` without a client needs the
        ``if __name__ == "__main__":`` guard, as any script using ``multiprocessing``.
    **options
        ``every``, ``batch_size``, ``workers``, ``processes``, ``on_batch``, ``cache``,
        ``where`` (``"auto"``, ``"local"``, ``"cluster"``: :class:`SweepRun`).

    Returns
    -------
    xarray.Dataset
        One variable per metric and ``status``, ``message``; dimensions the swept
        settings in grid order; attributes the base settings (``setting_<name>``),
        ``t_end`` and ``every``. Each point equals a plain
        ``simulate(settings.copy(**point), t_end, every)`` reduced by
        :func:`trajectory_metrics` (and :func:`lab_metrics`), bit for bit.

    Raises
    ------
    ValueError
        A grid value out of bounds, an unknown setting or metric.

    Examples
    --------
    >>> ds = sweep(Settings(model="attention", path="oscillation"),   # doctest: +SKIP
    ...            grid={"beta": [0.5, 1, 2], "gamma": [0.1, 1, 10]}, t_end=5,
    ...            metrics=["kl_mean", "lag_amplitude"])
    """
    return SweepRun(settings, grid, t_end, metrics, client, **options).run()


def two_source_lag_amplitude(beta, gamma, omega, amplitude):
    """The log-odds lag amplitude ``β δ ω / √(λ² + ω²)``, ``λ = γ/β``, of one row with two
    sources whose score difference is ``δ sin(ωt)`` (Theory page: tracking the moving
    softmax). Broadcasts over arrays."""
    beta, gamma = np.asarray(beta, float), np.asarray(gamma, float)
    omega, amplitude = np.asarray(omega, float), np.asarray(amplitude, float)
    lam = gamma / beta
    return beta * amplitude * omega / np.sqrt(lam**2 + omega**2)


__all__ = ["CACHE_ENV", "METRICS", "STATUSES", "WHERE", "Metric", "Schedule", "SweepRun",
           "cache_dir", "cache_path", "check_grid", "cluster_pays", "dask_kept_out",
           "default_metrics", "free_cores", "grid_points", "lab_metrics", "netcdf_bytes",
           "parse_axis", "predict_schedule", "run_batch", "run_point", "running_client",
           "split", "sweep", "sweep_key", "task_sizes", "trajectory_metrics",
           "two_source_lag_amplitude"]
