"""Sessions, faults, load and security of the served dashboard (marker ``ui``).

Two kinds of server:

* an in-process server (``pn.serve(..., threaded=True)``) so that a test can read
  the registry of running periodic callbacks (``app.dashboard.live_callbacks``),
  reach one session's simulation (fault injection by monkeypatching) and measure
  the process's RSS; its sessions are opened by ``bokeh.client.pull_session``
  clients which then send the ``document_ready`` event a browser sends, so that the
  dashboard's ``onload`` starts its periodic callback as for a real page;
* ``panel serve app/main.py`` with the README's flags, as a subprocess whose log is
  grepped for tracebacks and errors, driven by headless Chromium.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import re
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import load_test
import panel as pn
import psutil
import pytest
from bokeh.client import pull_session
from bokeh.events import DocumentReady
from serving import free_port, reachable, served
from tornado.ioloop import IOLoop

from app import dashboard as dashboard_module

pytestmark = pytest.mark.ui

def _wait_until(predicate, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# -- in-process server ---------------------------------------------------------
@pytest.fixture(scope="module")
def inproc():
    """URL of an in-process server of the dashboard; sessions unused for 0.5 s are destroyed."""
    port = free_port()
    server = pn.serve(
        {"main": lambda: dashboard_module.Dashboard()}, port=port, address="127.0.0.1",
        websocket_origin=[f"127.0.0.1:{port}"], threaded=True, show=False, start=True,
        check_unused_sessions_milliseconds=500, unused_session_lifetime_milliseconds=500)
    url = f"http://127.0.0.1:{port}/main"
    try:
        assert _wait_until(lambda: reachable(url), 60, 0.3), "in-process server did not start"
        yield url
    finally:
        server.stop()
        server.join(timeout=10)


def _open_session(url):
    """A server session whose page reported ``document_ready`` (as a browser does).

    The client runs on an event loop of its own, closed with it by :func:`_close_sessions`
    (a client closed alone keeps its loop's selector and sockets: memory of the
    test process, not of the server it measures).
    """
    client = pull_session(url=url, io_loop=IOLoop())
    client.document.callbacks.send_event(DocumentReady())
    client.request_server_info()  # runs the client's loop: the event is sent first
    return client


def _close_sessions(*clients) -> None:
    """Close ``clients``, then the event loops they ran on."""
    loops = [client._connection.io_loop for client in clients]
    for client in clients:
        client.close()
    for loop in loops:
        loop.close(all_fds=True)


def _alive_dashboards() -> int:
    gc.collect()
    return sum(isinstance(o, dashboard_module.Dashboard) for o in gc.get_objects())


def _rss() -> int:
    """RSS after a collection, with freed heap given back to the OS (glibc malloc_trim),
    so that the figure is what is still held rather than allocator slack."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return psutil.Process().memory_info().rss


def test_sessions_start_and_stop_their_callbacks_and_memory_is_flat(inproc, capsys):
    """50 sessions opened and closed one after the other (each starts its callback).

    Afterwards no periodic callback runs and no dashboard of a closed session is
    left in memory, and the RSS is within 10 % of the level after the first 5
    sessions (as the issue asks; measured: +7 %, 153 → 164 MB, all of it within the
    next 15 sessions, then flat).
    """
    assert dashboard_module.live_callbacks() == 0
    alive_before = _alive_dashboards()

    def one_session(i):
        client = _open_session(inproc)
        started = _wait_until(lambda: dashboard_module.live_callbacks() >= 1, 20)
        _close_sessions(client)
        return started

    rss = {}
    started = time.monotonic()
    with ThreadPoolExecutor(3) as pool:  # three clients at a time: the test stays short
        assert all(pool.map(one_session, range(5)))
        assert _wait_until(lambda: dashboard_module.live_callbacks() == 0, 20)
        rss[5] = _rss()
        assert all(pool.map(one_session, range(45)))
    assert _wait_until(lambda: dashboard_module.live_callbacks() == 0, 30)
    rss[50] = _rss()
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\n[sessions] 50 sessions in {elapsed:.0f} s; RSS after 5: "
              f"{rss[5] / 1e6:.0f} MB, after 50: {rss[50] / 1e6:.0f} MB; live callbacks: "
              f"{dashboard_module.live_callbacks()}")
    assert dashboard_module.live_callbacks() == 0
    assert _alive_dashboards() <= alive_before
    assert rss[50] <= 1.10 * rss[5]


def test_a_failing_session_does_not_stop_the_others_and_resets(inproc, monkeypatch):
    # The clients run their own event loop in a worker thread (Playwright owns this one's).
    worker = ThreadPoolExecutor(1)
    clients = [worker.submit(_open_session, inproc).result(timeout=60) for _ in range(2)]
    try:
        assert _wait_until(lambda: dashboard_module.live_callbacks() == 2, 10)
        bad, good = dashboard_module.running_dashboards()

        def boom(n=1):
            raise RuntimeError("injected fault")

        monkeypatch.setattr(bad.sim, "advance", boom)
        assert _wait_until(lambda: "injected fault" in bad.status.object, 10)
        assert bad.sim.status == "failed" and "injected fault" in bad.notice
        assert not bad.playing and good.notice == ""
        t = good.sim.t
        assert _wait_until(lambda: good.sim.t > t, 10), "the other session stopped"
        assert good.sim.status == "running"

        monkeypatch.undo()
        doc = bad._session_context._document

        def reset_and_play():
            bad.reset()
            bad.playing = True

        doc.add_next_tick_callback(reset_and_play)
        assert _wait_until(lambda: bad.sim.status == "running" and bad.sim.t > 0, 10)
        assert bad.notice == ""
    finally:
        worker.submit(_close_sessions, *clients).result(timeout=30)
        worker.shutdown()
    assert _wait_until(lambda: dashboard_module.live_callbacks() == 0, 10)


# -- panel serve subprocess (README flags) -----------------------------------------
@pytest.fixture(scope="module")
def readme_server(tmp_path_factory):
    """``panel serve app/main.py`` with the README's flags (``serving.Server``)."""
    with served(tmp_path_factory.mktemp("serve-sessions") / "panel.log") as server:
        yield server


def test_foreign_origin_websocket_is_refused(readme_server):
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    url, port = readme_server.url, readme_server.port
    with urllib.request.urlopen(url, timeout=30) as resp:
        html = resp.read().decode()
    token = re.search(r'"token":\s*"([^"]+)"', html) or re.search(r"token=([\w.\-]+)", html)

    async def connect(origin):
        headers = {"Origin": origin}
        if token:
            headers["Sec-WebSocket-Protocol"] = f"bokeh, {token[1]}"
        request = HTTPRequest(f"ws://127.0.0.1:{port}/main/ws", headers=headers,
                              request_timeout=20)
        try:
            conn = await websocket_connect(request)
        except HTTPClientError as err:
            return err.code
        conn.close()
        return 101

    def run(origin):  # a thread with its own event loop (Playwright's owns this thread's)
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, connect(origin)).result(timeout=60)

    assert run("http://evil.example") == 403
    if token:  # the same request from the page's own origin is accepted
        assert run(f"http://127.0.0.1:{port}") == 101


def test_nasty_url_shows_a_message_and_defaults(readme_server, page):
    url = readme_server.url
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url + "?n_tokens=1000000000&beta=abc&beta=2&dt=&%E2%98%83=%00&model=linear"
              "&steps_per_frame=-3&compare=maybe")
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    for phrase in ("URL parameter n_tokens", "URL parameter beta given 2 times",
                   "URL parameter dt", "URL parameter model", "URL parameter steps_per_frame",
                   "URL parameter compare", "unknown URL parameter"):
        page.get_by_text(phrase).first.wait_for(timeout=20000)
    page.get_by_text("N = 8").first.wait_for(timeout=20000)
    assert errors == []
    page.get_by_role("button", name=re.compile("Play")).click()
    page.goto("about:blank")


def test_reduced_load_and_pages_closed_mid_stream(readme_server, browser, capsys):
    """The load test of ``scripts/load_test.py`` reduced from 8 pages × 120 s to
    3 pages × 15 s (the test tier's time budget; the full size is run by hand),
    then every page is closed while it is still streaming: every page kept
    updating and the server log has no Traceback or ERROR.
    """
    result = load_test.measure(browser, readme_server.url, pages=3, seconds=15,
                               server_pid=readme_server.proc.pid)
    with capsys.disabled():
        print("\n[load] " + load_test.summary(result))
    assert min(result["fps"]) > 0.5, result
    time.sleep(2)  # let the closed pages' sessions go (unused session lifetime 1 s)
    assert readme_server.errors() == [], readme_server.log()
