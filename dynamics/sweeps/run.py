"""A sweep, run: :class:`SweepRun` (watched and cancelled).

A sweep's first point runs here and gives the cost per point; the schedule model
(:mod:`dynamics.sweeps.schedule`) says whether the rest goes to a cluster
(:mod:`dynamics.sweeps.cluster`), which starts while points keep running here.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..settings import Settings
from .cache import cache_path, dask_kept_out, open_cached, store, sweep_key
from .cluster import ClusterStarter, ClusterTasks, running_client
from .dataset import point_results, sweep_dataset
from .grid import check_grid, grid_points
from .metrics import METRICS, default_metrics
from .points import BATCH_RUNS, run_batch
from .schedule import LOCAL_CHUNK_S, cluster_pays, prospect, task_sizes

#: Where a sweep runs: ``auto`` (chosen from its estimated cost, :meth:`SweepRun.run`),
#: ``local`` (in this process, one task after the other) or ``cluster`` (dask).
WHERE = ("auto", "local", "cluster")


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
        Points per task; by default about
        :data:`~dynamics.sweeps.schedule.TASKS_PER_THREAD` tasks per worker thread, each
        of every n-th point of the grid.
    workers : int, optional
        Workers of the embedded cluster (default: the machine's cores).
    processes : bool
        The embedded cluster's workers are processes (True) or threads.
    on_batch : callable, optional
        Called as ``on_batch(results, done, total)`` after each finished batch, with
        ``results`` a list of ``(index, point_result)`` (from the thread calling
        :meth:`run`).
    cache : bool
        Read and write finished sweeps in :func:`~dynamics.sweeps.cache.cache_dir`.
    where : {"auto", "local", "cluster"}
        ``local``: every point in this process; ``cluster``: every point on the cluster
        (the client's, else an embedded one, waited for), whatever the sweep's size;
        ``auto``: the sooner of the two by the estimated cost (:meth:`run`). The result
        is the same, bit for bit.

    Attributes
    ----------
    done, total : int
        Points finished so far and in all.
    cached : bool
        The last :meth:`run` read its result from the cache.
    ran_on : str or None
        Where the points of the last :meth:`run` ran: ``local`` (all in this process),
        ``cluster`` (all on the cluster), ``local+cluster`` (``auto``: the first points
        here, the rest on a cluster) or ``cache`` (none ran: read from the cache).
    local_points, cluster_points : int
        Points of the last :meth:`run` run in this process, and on the cluster.
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
        self.cluster_points = 0
        self._cancel = threading.Event()
        self._tasks: ClusterTasks | None = None  # the tasks on a cluster, while they run
        self.results: dict[tuple[int, ...], dict] = {}

    @property
    def key(self) -> str:
        """The cache key of this sweep (:func:`sweep_key`)."""
        return sweep_key(self.base, self.grid, self.t_end, self.metrics, self.every)

    @property
    def tasks(self) -> ClusterTasks | None:
        """Its tasks on a cluster (their client, their keys) while they run, else None."""
        return self._tasks

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> ClusterTasks | None:
        """Stop the sweep: pending tasks are cancelled, :meth:`run` returns what finished
        (the other points with status ``cancelled``). Safe from any thread. Returns the
        tasks on a cluster it cancelled (None if none): those still running there run on
        in their workers' threads."""
        self._cancel.set()
        tasks = self._tasks
        if tasks is not None:
            tasks.cancel()
        return tasks

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
        (:data:`~dynamics.sweeps.schedule.CLUSTER_STARTUP_S` for an embedded one,
        :data:`~dynamics.sweeps.schedule.CLIENT_STARTUP_S` for a running one given as
        ``client``). An embedded cluster starts in a thread while
        points keep running here, and takes the rest of the points when it is ready, in
        tasks of :func:`task_sizes`. ``ran_on`` says where it ran.
        """
        self.local_points, self.cluster_points, self.ran_on = 0, 0, None

        def light():
            return dask_kept_out() if keep_dask_out else contextlib.nullcontext()

        if self.cache:
            path = cache_path(self.key)
            if os.path.exists(path):
                with light():
                    result = open_cached(path)
                self._load_cached(result)
                self.done, self.cached, self.ran_on = self.total, True, "cache"
                if self.on_batch is not None:
                    results = point_results(result, self.points, self.metrics)
                    self.results.update(results)
                    self.on_batch(results, self.total, self.total)
                return result
        self._execute()
        self.ran_on = ("local+cluster" if self.local_points and self.cluster_points
                       else "cluster" if self.cluster_points or self.where == "cluster"
                       else "local")
        with light():
            result = self.dataset()
            if self.cache and not self.cancelled:
                store(self.key, result)
        return result

    def _load_cached(self, ds) -> None:
        """What a cache hit sets besides the result (a grid's points are known)."""

    def _execute(self) -> None:
        # a fixed shuffle: neighbouring grid points cost alike (a stiff corner is slow
        # throughout), so any run of consecutive points is a fair sample of the grid
        order = np.random.default_rng(0).permutation(len(self.points))
        queue = deque((self.points[k][0], {**self.base, **self.points[k][1]}) for k in order)
        if self.client is None and self.where != "local":
            self.client = running_client()  # a client made in this process is reused
        if self.where == "cluster":
            # every point on the cluster, whatever the sweep's size (none runs here, where
            # a cancel could not stop it; on a worker it is stopped with its worker): the
            # tasks are sized without a measured cost
            self._run_on_cluster(list(queue))
            return
        starter = None
        try:
            t0 = time.perf_counter()
            self._run_here(queue, 1)  # the probe: the cost per point
            self.cost = time.perf_counter() - t0
            if self.where == "auto" and queue and not self.cancelled:
                threads, startup = prospect(self.client, self.workers)
                if cluster_pays(len(queue), self.cost, threads, startup):
                    starter = ClusterStarter(self.client, self.workers, self.processes)
            if starter is not None:
                chunk = max(1, min(BATCH_RUNS, int(LOCAL_CHUNK_S / max(self.cost, 1e-9))))
                while queue and not self.cancelled and not starter.ready.is_set():
                    self._run_here(queue, chunk)
                if not queue or self.cancelled:
                    return
                try:
                    client = starter.client()
                except Exception:  # auto: a cluster that does not start leaves them here
                    pass
                else:
                    self._run_on(client, list(queue))
                    return
            while queue and not self.cancelled:
                self._run_here(queue, BATCH_RUNS)
        finally:
            if starter is not None:
                starter.close()

    def _run_on_cluster(self, points: list) -> None:
        """Run ``points`` on the cluster (the client's, else an embedded one started and
        waited for; closed after them)."""
        starter = ClusterStarter(self.client, self.workers, self.processes)
        try:
            client = starter.client()
            if not self.cancelled:
                self._run_on(client, points)
        finally:
            starter.close()

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
        threads = sum(client.nthreads().values()) or 1
        tasks = ClusterTasks(client, points,
                             task_sizes(len(points), threads, self.cost, self.batch_size))
        self._tasks = tasks
        try:
            if self._cancel.is_set():  # cancelled before a cancel could see the tasks
                return
            tasks.submit(run_batch, self.t_end, self.metrics, self.every)  # none if cancelled
            for results in tasks.finished(self._cancel, self.metrics):
                self.cluster_points += len(results)
                self._record(results)
        finally:
            self._tasks = None

    def dataset(self):
        """The results so far as an ``xarray.Dataset`` (points not run: ``cancelled``)."""
        return sweep_dataset(self.grid, self.base, self.metrics, self.results, self.t_end,
                             self.every)

