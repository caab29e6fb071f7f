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

    Returns
    -------
    threading.Thread or None
        The thread restarting them (started), or None when no worker was running one.
    """
    tasks = run.tasks  # its tasks on the cluster, while they run
    client, keys = (tasks.client, tasks.keys) if tasks is not None else (None, set())
    busy = []
    if client is not None and keys:
        try:
            busy = [w for w, tasks in client.processing().items() if keys & set(tasks)]
        except Exception:  # the cluster may be closing already
            busy = []
    run.cancel()
    if not busy:
        return None

    def restart():
        try:
            client.restart_workers(busy, raise_for_error=False)
        except Exception:  # a worker gone already, a closing cluster
            pass

    restarting = threading.Thread(target=restart, daemon=True)
    restarting.start()
    return restarting
