"""Sessions, faults, load and security of the served dashboard (marker ``ui``).

Two kinds of server:

* an in-process server (``session_probe.py``) so that a test can read the registry
  of running periodic callbacks (``app.dashboard.live_callbacks``) and reach one
  session's simulation (fault injection by monkeypatching); the lifecycle test runs
  the probe as a script, a fresh server process whose RSS it measures;
* ``panel serve app/main.py`` with the README's flags, as a subprocess whose log is
  grepped for tracebacks and errors, driven by headless Chromium.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import load_test
import pytest
from session_probe import close_sessions, open_session, serve_in_process, wait_until

from app import dashboard as dashboard_module

pytestmark = pytest.mark.ui

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("session_probe.py")
#: Sessions the lifecycle test opens and closes (the first 10 set the memory's level).
SESSIONS = 20


# -- in-process server ---------------------------------------------------------
@pytest.fixture(scope="module")
def inproc():
    """URL of an in-process server of the dashboard (``session_probe.serve_in_process``)."""
    with serve_in_process() as url:
        yield url


@pytest.mark.slow
def test_sessions_start_and_stop_their_callbacks_and_memory_is_flat(capsys):
    """20 sessions opened and closed, three at a time (each starts its callback), on a
    server in a fresh process (``session_probe.py``: the memory is a server's, not that
    of a test process that ran the suite first).

    Afterwards no periodic callback runs and no dashboard of a closed session is left
    in memory (counted among the live objects: a session kept for good is seen however
    small), and the RSS is within 10 % of the level after the first 10 sessions (the
    level after 50 was the same, 214 MB, as after 10, while the level after 5 varied
    191-203 MB from run to run: the server is still warming up there, and a ratio
    against it had failed at +11 % with no leak). 20 sessions, not 50 (nor 30, as
    before): each costs about 3 s of CPU on 2 cores (the page's document built, sent and
    read back), and the object count, not the RSS, is what sees a session kept (one
    dashboard kept by a single session is counted).
    """
    done = subprocess.run([sys.executable, str(PROBE), "--sessions", str(SESSIONS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")})
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout.strip().splitlines()[-1])
    with capsys.disabled():
        print(f"\n[sessions] {SESSIONS} sessions in {r['seconds']:.0f} s; RSS after 10: "
              f"{r['rss_first'] / 1e6:.0f} MB, after {SESSIONS}: {r['rss_all'] / 1e6:.0f} MB; "
              f"live callbacks: {r['callbacks_after']}")
    assert r["callbacks_before"] == 0 and r["all_started"]
    assert r["callbacks_after"] == 0
    assert r["dashboards_left"] <= 0
    assert r["rss_all"] <= 1.10 * r["rss_first"]


@pytest.mark.slow
def test_a_failing_session_does_not_stop_the_others_and_resets(inproc, monkeypatch):
    # The clients run their own event loop in a worker thread (Playwright owns this one's).
    worker = ThreadPoolExecutor(1)
    clients = [worker.submit(open_session, inproc).result(timeout=60) for _ in range(2)]
    try:
        assert wait_until(lambda: dashboard_module.live_callbacks() == 2, 10)
        bad, good = dashboard_module.running_dashboards()

        def boom(n=1):
            raise RuntimeError("injected fault")

        monkeypatch.setattr(bad.sim, "advance", boom)
        assert wait_until(lambda: "injected fault" in bad.status.object, 10)
        assert bad.sim.status == "failed" and "injected fault" in bad.notice
        assert not bad.playing and good.notice == ""
        t = good.sim.t
        assert wait_until(lambda: good.sim.t > t, 10), "the other session stopped"
        assert good.sim.status == "running"

        monkeypatch.undo()
        doc = bad.heatmaps.attention.document  # (the session's document)

        def reset_and_play():
            bad.reset()
            bad.playing = True

        doc.add_next_tick_callback(reset_and_play)
        assert wait_until(lambda: bad.sim.status == "running" and bad.sim.t > 0, 10)
        assert bad.notice == ""
    finally:
        worker.submit(close_sessions, *clients).result(timeout=30)
        worker.shutdown()
    assert wait_until(lambda: dashboard_module.live_callbacks() == 0, 10)


# -- panel serve subprocess (README flags) -----------------------------------------
@pytest.fixture
def readme_server(app_server):
    """The browser tier's shared ``panel serve app/main.py`` with the README's flags
    (``serving.Server``; ``conftest.app_server``)."""
    return app_server


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_reduced_load_and_pages_closed_mid_stream(readme_server, server_log, browser, capsys):
    """The load test of ``scripts/load_test.py`` reduced from 8 pages × 120 s to
    3 pages × 10 s (the test tier's time budget; the full size is run by hand; 10 s
    counts at least five frames of a page streaming at the floor the assertion sets),
    then every page is closed while it is still streaming: every page kept
    updating and the server logged no Traceback or ERROR meanwhile.
    """
    result = load_test.measure(browser, readme_server.url, pages=3, seconds=10,
                               server_pid=readme_server.proc.pid)
    with capsys.disabled():
        print("\n[load] " + load_test.summary(result))
    assert min(result["fps"]) > 0.5, result
    time.sleep(2)  # let the closed pages' sessions go (unused session lifetime 1 s)
    assert server_log.errors() == [], server_log.text()
