"""An in-process server of the dashboard and clients that open sessions on it.

Used by ``test_sessions.py`` (fault injection reaches a session's simulation) and run
as a script for the lifecycle test, in a fresh process so that the memory measured is
that of a server, not of a test process that ran the rest of the suite first::

    PYTHONPATH=scripts python tests/ui/session_probe.py [--sessions 50] [--first 10]

prints, as JSON, the RSS after the first sessions and after all of them, the periodic
callbacks still running and the dashboards still alive.

Sessions are opened by ``bokeh.client.pull_session`` clients which then send the
``document_ready`` event a browser sends, so that the dashboard's ``onload`` starts its
periodic callback as for a real page.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import time
from concurrent.futures import ThreadPoolExecutor

import panel as pn
import psutil
from bokeh.client import pull_session
from bokeh.events import DocumentReady
from serving import free_port, reachable
from tornado.ioloop import IOLoop

from app import dashboard as dashboard_module
from app.serving import server as app_server

#: The event loop of each open client (``open_session`` gives each its own).
CLIENT_LOOPS: dict = {}


def wait_until(predicate, timeout, step=0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


@contextlib.contextmanager
def serve_in_process():
    """URL of a threaded in-process server of the dashboard; sessions unused for 0.5 s
    are destroyed."""
    port = free_port()
    server = pn.serve(
        {"main": lambda: dashboard_module.Dashboard()}, port=port, address="127.0.0.1",
        websocket_origin=[f"127.0.0.1:{port}"], threaded=True, show=False, start=True,
        check_unused_sessions_milliseconds=500, unused_session_lifetime_milliseconds=500)
    url = f"http://127.0.0.1:{port}/main"
    try:
        if not wait_until(lambda: reachable(url), 60, 0.3):
            raise RuntimeError("in-process server did not start")
        yield url
    finally:
        server.stop()
        server.join(timeout=10)


def open_session(url):
    """A server session whose page reported ``document_ready`` (as a browser does).

    The client runs on an event loop of its own, closed with it by :func:`close_sessions`
    (a client closed alone keeps its loop's selector and sockets alive).
    """
    loop = IOLoop()
    client = pull_session(url=url, io_loop=loop)
    CLIENT_LOOPS[client] = loop
    client.document.callbacks.send_event(DocumentReady())
    client.request_server_info()  # runs the client's loop: the event is sent first
    return client


def close_sessions(*clients) -> None:
    """Close ``clients``, then the event loops they ran on."""
    loops = [CLIENT_LOOPS.pop(client) for client in clients]
    for client in clients:
        client.close()
    for loop in loops:
        loop.close(all_fds=True)


def alive_dashboards() -> int:
    gc.collect()
    return sum(isinstance(o, dashboard_module.Dashboard) for o in gc.get_objects())


def rss() -> int:
    """RSS after the collection and heap trim the app does after a session ends, so
    that the figure is what is still held rather than allocator slack."""
    app_server.return_memory()
    return psutil.Process().memory_info().rss


def lifecycle(sessions: int = 50, first: int = 10) -> dict:
    """Open and close ``sessions`` sessions, three at a time; measure after ``first``."""
    with serve_in_process() as url:
        alive_before = alive_dashboards()

        def one_session(_):
            client = open_session(url)
            started = wait_until(lambda: dashboard_module.live_callbacks() >= 1, 20)
            close_sessions(client)
            return started

        result = {"callbacks_before": dashboard_module.live_callbacks()}
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            result["all_started"] = all(pool.map(one_session, range(first)))
            wait_until(lambda: dashboard_module.live_callbacks() == 0, 20)
            result["rss_first"] = rss()
            result["all_started"] &= all(pool.map(one_session, range(sessions - first)))
        wait_until(lambda: dashboard_module.live_callbacks() == 0, 30)
        # a closed page's session is destroyed up to a check period after its callback
        # stopped: wait for that (a dashboard kept for good still fails after 30 s)
        wait_until(lambda: alive_dashboards() <= alive_before, 30, step=0.5)
        result["rss_all"] = rss()
        result["seconds"] = time.monotonic() - t0
        result["callbacks_after"] = dashboard_module.live_callbacks()
        result["dashboards_left"] = alive_dashboards() - alive_before
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--first", type=int, default=10)
    args = parser.parse_args()
    import scipy.linalg  # noqa: F401 (SciPy's own BLAS, for the limit to reach it)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # one BLAS thread, as a server of app/main.py runs
        print(json.dumps(lifecycle(args.sessions, args.first)))
