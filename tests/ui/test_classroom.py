"""A reduced classroom on the README's classroom flags (``scripts/classroom.py``), marker ``ui``.

The full classroom (30 client sessions + 2 pages, stage by stage) is run by hand:
``.venv/bin/python scripts/classroom.py``. Here: 10 Bokeh client sessions (acknowledging
frames as the page does) and 1 Chromium page for 6 s against ``panel serve`` with
``serving.classroom_flags()`` — 2 worker processes, idle sessions dropped after 15 s.
"""

from __future__ import annotations

import re
import time

import classroom
import pytest
from serving import classroom_flags, served

from app.serving.pacing import MIN_FPS

pytestmark = pytest.mark.ui


@pytest.mark.slow
def test_a_reduced_classroom_streams_to_every_session_and_idle_sessions_expire(
        tmp_path, browser, capsys):
    with served(tmp_path / "panel.log", flags=classroom_flags(procs=2),
                env={"PANEL_LOG_LEVEL": "info", "PYTHONUNBUFFERED": "1"}) as srv:
        # (Panel logs sessions created/destroyed to stdout: unbuffered, read while running)
        result = classroom.run(browser, srv.url, srv.proc.pid, stages=(10,), pages=1,
                               seconds=6.0, warmup=3.0, slider_changes=0,
                               log=lambda *_: None)
        # every session was closed (run() closes them; the server sees the websockets
        # close, 11 of them) and the server then drops them within the unused-session
        # lifetime (15 s) plus one check interval (5 s)
        def count(pattern):
            return len(re.findall(pattern, srv.log()))

        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and count("WebSocket connection closed") < 11:
            time.sleep(0.25)
        closed = time.monotonic()
        # every session's document, the clients' (created by their websocket) and the
        # page's (by its request), is logged as "launching"
        created = count(r"Session \d+ launching")
        while time.monotonic() < closed + 40 and count(r"Session \d+ destroyed") < created:
            time.sleep(0.25)
        expiry = time.monotonic() - closed
        destroyed = len(re.findall(r"Session \d+ destroyed", srv.log()))
        errors = srv.errors()
    stage = result["stages"][-1]
    with capsys.disabled():
        print("\n[classroom] " + classroom.stage_summary(stage)
              + f"; {destroyed}/{created} sessions dropped {expiry:.0f} s after closing")
    assert result["workers"] == 2  # --num-procs 2
    assert errors == [] and result["page_errors"] == [] and stage["client_errors"] == []
    assert stage["sessions"] == 11 and len(stage["client_fps"]) == 10
    # every session keeps streaming (acknowledged frames: well above one per ACK_TIMEOUT)
    assert min(stage["page_fps"] + stage["client_fps"]) > 1.5, stage
    # a cap shown is never below the floor
    assert all(cap >= MIN_FPS for cap in stage["caps"] if cap is not None), stage["caps"]
    assert created >= 11 and destroyed >= created, (created, destroyed)
    assert expiry < 35  # lifetime 15 s + check every 5 s, and a loaded machine's slack
