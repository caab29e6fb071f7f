"""Where and in what tasks a sweep runs: the tasks' sizes (:func:`task_sizes`,
:func:`split`), a model of their schedule on a cluster (:func:`predict_schedule`), and
whether a cluster, its start-up included, ends sooner than this process
(:func:`cluster_pays`, :func:`prospect`).

The constants are the model's: start-up and per-task seconds, the smallest task worth
its scheduling.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Tasks per worker thread of :func:`split` (the tasks of a sweep when the cost per point
#: is not known): enough for the last tasks to even out the workers, few enough for the
#: scheduling to stay a small cost.
TASKS_PER_THREAD = 4

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


def prospect(client, workers: int | None) -> tuple[int, float]:
    """Worker threads and start-up seconds of the cluster a sweep would run on.

    Parameters
    ----------
    client : distributed.Client or callable or None
        A running client (its threads, :data:`CLIENT_STARTUP_S`), a callable that makes
        one, or None: an embedded cluster (:data:`CLUSTER_STARTUP_S`).
    workers : int, optional
        Workers of an embedded cluster (default: the machine's cores); without a client
        at most as many as cores are free (:func:`free_cores`).
    """
    if client is not None and hasattr(client, "submit"):
        return sum(client.nthreads().values()), CLIENT_STARTUP_S
    workers = workers or os.cpu_count() or 1
    if client is None:
        workers = min(workers, free_cores())
    return workers, CLUSTER_STARTUP_S
