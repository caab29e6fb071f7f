"""The Dask cluster of the Sweep tab: one embedded ``LocalCluster`` per server process,
shared by the sessions and kept warm for the next sweep, and the cancelling of a sweep
on it.

A cancel cancels the sweep's pending tasks and restarts the workers still running one
of its batches (a running task cannot be interrupted otherwise: it kept a core busy
for up to a minute); another sweep's tasks on those workers are run again elsewhere.
"""

from __future__ import annotations

import os
import threading

from dynamics.sweeps import QUIET_CLUSTER

_CLIENT = None
_CLIENT_LOCK = threading.Lock()


def shared_client():
    """The process's ``distributed.Client`` of an embedded ``LocalCluster`` (one
    single-threaded worker process per core), started on first use and kept."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None or _CLIENT.status not in ("running", "connecting"):
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, **QUIET_CLUSTER)
            _CLIENT = Client(cluster, set_as_default=False)
        return _CLIENT


def cancel_sweep(run) -> threading.Thread | None:
    """Cancel ``run`` (a :class:`dynamics.SweepRun`; its finished points stay) and restart
    the workers running one of its batches.

    The scheduler is asked which workers process its tasks before the cancel (it forgets
    them then); after it, in a thread (the page's event loop does not wait on the
    workers), the workers are asked what their threads still run (a task handed out
    meanwhile runs on there), and every worker found is restarted.

    Returns
    -------
    threading.Thread or None
        The thread restarting them (started), or None when the sweep had no tasks on a
        cluster.
    """
    tasks = run.tasks  # its tasks on the cluster, while they run
    before = tasks.workers_running(ask_workers=False) if tasks is not None else set()
    cancelled = run.cancel()  # (an adaptive sweep's tasks of a later round, by then)
    asked = {t for t in (tasks, cancelled) if t is not None}  # (each asked once)
    if not asked:
        return None
    client = next(iter(asked)).client

    def restart():
        busy = set(before)
        for t in asked:
            busy |= t.workers_running()
        if not busy:
            return
        try:
            client.restart_workers(sorted(busy), raise_for_error=False)
        except Exception:  # a worker gone already, a closing cluster
            pass

    restarting = threading.Thread(target=restart, daemon=True)
    restarting.start()
    return restarting
