"""The cluster of a sweep: a running default client (:func:`running_client`), an
embedded ``LocalCluster`` started in a thread while points run here
(:class:`ClusterStarter`), and a sweep's points as tasks on a cluster, collected as they
finish and cancellable (:class:`ClusterTasks`).

``distributed`` is imported only when a cluster is used.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

#: ``LocalCluster`` options of an embedded cluster: no dashboard, and the scheduler's small
#: HTTP server (health, metrics) on a free port rather than 8787.
QUIET_CLUSTER = {"dashboard_address": None, "scheduler_kwargs": {"dashboard_address": ":0"}}


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


class ClusterStarter:
    """The cluster of a sweep, made ready in a thread of its own while points run here.

    A ``Client`` given is ready at once; a callable is called, or an embedded
    ``LocalCluster`` of ``workers`` single-threaded workers (``processes`` or threads)
    started, in the thread. :meth:`close` closes what was started here.
    """

    def __init__(self, client, workers: int | None, processes: bool):
        self.ready = threading.Event()
        self._client, self._error, self._owned = None, None, []
        if client is not None and hasattr(client, "submit"):
            self._client = client
            self.ready.set()
            return
        threading.Thread(target=self._start, args=(client, workers, processes),
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


class ClusterTasks:
    """A sweep's points as tasks on a running cluster: batches of the given sizes,
    submitted to ``client`` (:meth:`submit`), collected as they finish
    (:meth:`finished`), cancelled from any thread (:meth:`cancel`).

    Parameters
    ----------
    client : distributed.Client
    points : list
        ``(index, values)`` of the points, in the order they go out.
    sizes : sequence of int
        Points per task (:func:`~dynamics.sweeps.schedule.task_sizes`).
    """

    def __init__(self, client, points: list, sizes: Sequence[int]):
        edges = np.cumsum([0, *sizes])
        self.client = client
        self.batches = [points[lo:hi] for lo, hi in itertools.pairwise(edges)]
        self.futures: list = []
        self.cancelled = False
        # a cancel from another thread waits for a submit under way (a task the scheduler
        # already runs is then among the keys it reads), and a submit after a cancel
        # submits nothing
        self._submitting = threading.Lock()

    def submit(self, run: Callable, *args) -> None:
        """Submit ``run(batch, *args)`` for every batch (none once cancelled)."""
        with self._submitting:
            if self.cancelled:
                return
            # the large tasks first (their priority the highest), the small ones to finish
            self.futures = [self.client.submit(run, batch, *args, pure=False,
                                               priority=len(self.batches) - k)
                            for k, batch in enumerate(self.batches)]

    @property
    def keys(self) -> set:
        """The keys of the tasks submitted (those a worker's processing list names)."""
        with self._submitting:
            return {f.key for f in self.futures}

    def workers_running(self, ask_workers: bool = True) -> set[str]:
        """The addresses of the workers running one of these tasks: those the scheduler
        has one processing on and, with ``ask_workers``, those whose thread still runs one
        (a task cancelled while it runs goes on in its thread: the scheduler no longer
        lists it; asking the workers takes a round trip to each)."""
        keys = self.keys
        if not keys:
            return set()
        busy = set()
        try:
            busy |= {w for w, tasks in self.client.processing().items() if keys & set(tasks)}
            if ask_workers:
                running = self.client.run(_running_keys, on_error="ignore")
                busy |= {w for w, tasks in running.items() if keys & set(tasks)}
        except Exception:  # the cluster may be closing already
            pass
        return busy

    def cancel(self) -> None:
        """Cancel the tasks submitted (pending ones do not run), and those not yet."""
        with self._submitting:
            self.cancelled = True
            futures = list(self.futures)
        if futures:
            try:
                self.client.cancel(futures)
            except Exception:  # the cluster may be closing already
                pass

    def finished(self, cancelled: threading.Event, metrics: Sequence[str]) -> Iterator[list]:
        """The results of each task as it finishes (none once ``cancelled`` is set); a
        task that could not run at all gives its points status ``error`` and NaN
        ``metrics``."""
        from distributed import as_completed

        for future in as_completed(self.futures, loop=self.client.loop):
            if future.cancelled() or cancelled.is_set():
                continue
            if future.status == "error":  # a task that could not run at all
                err = future.exception()
                batch = self.batches[self.futures.index(future)]
                yield [(idx, {**dict.fromkeys(metrics, math.nan), "status": "error",
                              "message": f"{type(err).__name__}: {err}"})
                       for idx, _ in batch]
            else:
                yield future.result()


def _running_keys(dask_worker) -> list:
    """The keys of the tasks a worker's threads run (run there by ``Client.run``),
    cancelled ones included."""
    return [ts.key for ts in dask_worker.state.all_running_tasks]
