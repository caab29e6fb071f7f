"""A classroom on one server: many sessions stream the dashboard from one ``panel serve``.

    .venv/bin/python scripts/classroom.py --clients 30 --pages 2 --stages 0,10,20,30

Serves ``app/main.py`` with the README's classroom flags (``serving.classroom_flags``:
``--num-procs 2``, idle-session expiry, token lifetime, keep-alive; websocket origins
limited to the served host) on a free loopback port, opens ``--pages`` real pages in
headless Chromium and then adds Bokeh client sessions stage by stage (``--stages``: the
number of client sessions at each stage). At each stage it measures, over
``--seconds``: every session's frames per second, the frame cap the server gives each
session (its status line says ``busy server: ≤ X frames/s`` when the load lowers it,
:mod:`app.serving.pacing`), the server's CPU and memory (RSS and USS summed over its
processes), and at the last stage the slider latency of the first page. Memory per
session is the slope of the server's USS against the number of sessions.

**The client sessions** (:class:`ClientPage`) are ``bokeh.client.pull_session``
sessions: each holds a copy of the page's Bokeh document, kept in sync by the server,
but runs no BokehJS. They do what the page does that the server depends on:

* send the ``document_ready`` event a browser sends once the page is shown (the
  dashboard starts its periodic callback on it);
* acknowledge every frame. The page does so with a ``CustomJS`` callback on the attention
  heatmap's source (``app/mainview/heatmaps.py``, ``ACK_ON_PAINT``): once the plot has painted a
  new frame, it sets ``ack.tags = [frame id]`` on a model named ``frame_ack``, which
  Bokeh sends back to the server, where ``Playback._on_ack`` counts the frame as shown
  (flow control, ``MAX_IN_FLIGHT``). A client session, which paints nothing, does the
  same from Python when a frame arrives: ``source.on_change("data", ...)`` on its copy
  of that source, setting the ``tags`` of its copy of ``frame_ack`` — sent to the
  server as the page's change would be. Without it, a session would be limited to one
  frame per ``ACK_TIMEOUT``.

Exits 1 on any error (server log Traceback/ERROR, page errors, a client that failed) or
if a session is starved (below ``--min-fps`` frames/s) at the last stage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import queue
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from serving import CHROMIUM, CHROMIUM_ARGS, classroom_flags, served

#: Counts the attention heatmap's data changes in a page (frames received).
PAGE_COUNTER = """
() => {
  const doc = Bokeh.documents[0];
  const src = [...doc._all_models.values()].find(
      m => m.data instanceof Object && "image" in m.data && "frame" in m.data);
  window.__frames = 0;
  src.properties.data.change.connect(() => { window.__frames += 1; });
  return true;
}
"""
#: The status line's frame cap when the server lowers it (``Playback.update_status``).
CAP = re.compile(r"busy server: (?:≤|&le;|&#8804;)\s*(\d+)")


class ClientPage:
    """A Bokeh client session standing in for a student's page (see the module docstring).

    Made by :class:`ClientGroup`, on its event loop; ``times`` are the monotonic times of
    the frames it received, ``status`` the last text of its status line.
    """

    def __init__(self, url: str, loop):
        # the document's model types must be known here: Panel's, and the app's own
        # components (their Bokeh models are defined, and named, when app is imported)
        import panel.models  # noqa: F401
        from bokeh.client import pull_session
        from bokeh.events import DocumentReady
        from bokeh.models import ColumnDataSource

        import app.dashboard  # noqa: F401
        from app.mainview.heatmaps import ACK_NAME

        self.times: list[float] = []
        self.status = ""
        self.error: BaseException | None = None
        self.open = False
        self._loop = loop
        # URL parameters go as arguments (the websocket URL is built from the path)
        parts = urllib.parse.urlsplit(url)
        base = urllib.parse.urlunsplit(parts._replace(query=""))
        arguments = dict(urllib.parse.parse_qsl(parts.query)) or None
        self._client = client = pull_session(url=base, io_loop=loop, arguments=arguments)
        doc = client.document
        source = next(m for m in doc.models if isinstance(m, ColumnDataSource)
                      and "image" in m.data and "frame" in m.data)

        ack = doc.select_one({"name": ACK_NAME})

        def acknowledge(attr, old, new):  # what the page's CustomJS does
            frame = new.get("frame")
            if frame is not None and len(frame):
                self.times.append(time.monotonic())
                ack.tags = [int(frame[0])]

        source.on_change("data", acknowledge)
        for model in doc.models:
            if "t = " in str(getattr(model, "text", "")):  # the status line
                model.on_change("text", lambda attr, old, new: setattr(self, "status", new))
        doc.callbacks.send_event(DocumentReady())
        self.open = True
        loop.add_callback(self._pump)

    async def _pump(self) -> None:
        """Apply the server's changes to the document until the connection closes.

        Bokeh's own ``loop_until_closed`` awaits one more nested coroutine per message
        (``_next`` → ``_handle_messages`` → ``_next`` …) and hits Python's recursion
        limit after a few hundred frames; this loop reads the same messages flat.
        """
        connection = self._client._connection
        try:
            while (message := await connection._pop_message()) is not None:
                if message.msgtype == "PATCH-DOC":
                    self._client._handle_patch(message)
        except BaseException as err:  # reported by the caller
            self.error = err
        finally:
            self.open = False

    def fps(self, t0: float, t1: float) -> float:
        """Frames received per second between monotonic times ``t0`` and ``t1``."""
        return sum(t0 <= t < t1 for t in list(self.times)) / (t1 - t0)

    @property
    def cap(self) -> float | None:
        """The frame cap its status line shows (None: not lowered)."""
        match = CAP.search(self.status)
        return float(match[1]) if match else None


class ClientGroup:
    """Client sessions sharing one event loop in one thread.

    (One thread per session would measure Python's lock between 30 threads, each waiting
    its turn for every message, rather than the server.) :meth:`add` pauses the loop, opens
    sessions on it and runs it again; :meth:`close` closes them all, as closed tabs.
    """

    def __init__(self, url: str):
        self.url = url
        self.clients: list[ClientPage] = []
        self.errors: list[str] = []
        self._commands: queue.Queue = queue.Queue()
        self._done = threading.Event()
        self._running = False
        self._loop = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from tornado.ioloop import IOLoop

        self._loop = loop = IOLoop()
        try:
            while (command := self._commands.get()) is not None:
                for _ in range(command):
                    try:
                        self.clients.append(ClientPage(self.url, loop))
                    except Exception as err:  # reported by the caller
                        self.errors.append(repr(err))
                self._running = True
                self._done.set()
                loop.start()  # until the next command stops it
                self._running = False
            for client in self.clients:
                client._client.close()
            deadline = time.monotonic() + 20
            while any(c.open for c in self.clients) and time.monotonic() < deadline:
                loop.run_sync(lambda: asyncio.sleep(0.1))
        finally:
            loop.close(all_fds=True)
            self._done.set()

    def _send(self, command) -> None:
        self._done.clear()
        self._commands.put(command)
        if self._running:
            self._loop.add_callback(self._loop.stop)
        self._done.wait(timeout=300)

    def add(self, n: int) -> None:
        """Open ``n`` more client sessions (returns once they are open)."""
        self._send(n)

    def close(self) -> None:
        """Close every session (as closed tabs) and end the thread."""
        self._send(None)
        self._thread.join(timeout=60)


def server_processes(pid: int) -> list[psutil.Process]:
    """The server process and its worker processes (``--num-procs``)."""
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def server_memory(pid: int) -> tuple[float, float]:
    """RSS and USS (MB) summed over the server's processes (USS: pages only that process
    holds, so the forked workers' shared pages are counted once, in none)."""
    rss = uss = 0.0
    for proc in server_processes(pid):
        info = proc.memory_full_info()
        rss, uss = rss + info.rss / 2**20, uss + info.uss / 2**20
    return rss, uss


def _open_page(context, url):
    page = context.new_page()
    page.goto(url, timeout=120000)  # (a loaded server builds the page for long)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=90000)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    page.wait_for_function(PAGE_COUNTER, timeout=60000)
    return page


def run(browser, url: str, server_pid: int, stages=(0, 10, 20, 30), pages: int = 2,
        seconds: float = 20.0, warmup: float = 4.0, slider_changes: int = 6,
        client_threads: int = 3, log=print) -> dict:
    """The classroom: ``pages`` Chromium pages, then client sessions stage by stage.

    Returns a dict with, per stage, the frames/s of every page and client, the caps
    shown, the server's CPU (% of one core, all processes) and memory; and the slider
    latency of the first page at the last stage, errors of pages and clients. The client
    sessions are spread over ``client_threads`` :class:`ClientGroup` s (opened in parallel,
    as students joining together).
    """
    import bench_browser

    procs = server_processes(server_pid)
    result = {"workers": len(procs) - 1, "stages": [], "page_errors": []}
    result["rss_idle_mb"], result["uss_idle_mb"] = server_memory(server_pid)
    contexts = [browser.new_context(viewport={"width": 1280, "height": 720})
                for _ in range(pages)]
    tabs = []
    groups = [ClientGroup(url) for _ in range(max(client_threads, 1))]

    def clients():
        return [c for g in groups for c in g.clients]

    try:
        for context in contexts:
            tab = _open_page(context, url)
            tab.on("pageerror", lambda exc: result["page_errors"].append(str(exc)))
            tabs.append(tab)
        for target in stages:
            started = time.monotonic()
            more = target - len(clients())
            if more > 0:
                shares = [more // len(groups) + (k < more % len(groups))
                          for k in range(len(groups))]
                with ThreadPoolExecutor(len(groups)) as pool:
                    list(pool.map(ClientGroup.add, groups, shares))
            time.sleep(warmup)
            procs = server_processes(server_pid)
            for proc in procs:
                proc.cpu_percent(None)
            me = psutil.Process()
            me.cpu_percent(None)
            page_before = [tab.evaluate("() => window.__frames") for tab in tabs]
            t0 = time.monotonic()
            time.sleep(seconds)
            t1 = time.monotonic()
            page_after = [tab.evaluate("() => window.__frames") for tab in tabs]
            cpu = sum(proc.cpu_percent(None) for proc in procs)
            client_cpu = me.cpu_percent(None)  # this process: the client sessions
            rss, uss = server_memory(server_pid)
            now = clients()
            stage = {
                "clients": len(now), "sessions": len(now) + len(tabs),
                "open_seconds": t0 - started - warmup,
                "page_fps": [(b - a) / (t1 - t0) for a, b in zip(page_before, page_after,
                                                                  strict=True)],
                "client_fps": [c.fps(t0, t1) for c in now],
                "caps": [c.cap for c in now],
                "cpu_percent": cpu, "client_cpu_percent": client_cpu,
                "rss_mb": rss, "uss_mb": uss,
                "load_average": os.getloadavg()[0],
                "client_errors": [e for g in groups for e in g.errors]
                + [repr(c.error) for c in now if c.error is not None]}
            result["stages"].append(stage)
            log(stage_summary(stage))
        if slider_changes and tabs:
            tab = tabs[0]
            if tab.evaluate(bench_browser.PAGE_HELPERS):
                result.update(bench_browser.slider_latency(tab, slider_changes))
                result["slider_load_average"] = os.getloadavg()[0]
    finally:
        for group in groups:
            group.close()
        for context in contexts:
            context.close()
    result["memory_per_session_mb"] = memory_per_session(result["stages"])
    return result


def memory_per_session(stages: list[dict]) -> dict:
    """Least-squares slope of the server's RSS and USS (MB) against the sessions open."""
    if len(stages) < 2:
        return {}
    x = [s["sessions"] for s in stages]
    out = {}
    for key in ("rss_mb", "uss_mb"):
        slope = statistics.linear_regression(x, [s[key] for s in stages]).slope
        out[key] = slope
    return out


def stage_summary(stage: dict) -> str:
    fps = stage["page_fps"] + stage["client_fps"]
    caps = [c for c in stage["caps"] if c is not None]
    cap = f"median cap shown {statistics.median(caps):.0f}" if caps else "no cap shown"
    return (f"{stage['sessions']:3d} sessions ({len(stage['page_fps'])} pages, "
            f"{stage['clients']} clients): frames/s pages "
            f"[{', '.join(f'{f:.1f}' for f in stage['page_fps'])}], clients min "
            f"{min(stage['client_fps'], default=math.nan):.1f} median "
            f"{statistics.median(stage['client_fps']) if stage['client_fps'] else math.nan:.1f}"
            f"; worst session {min(fps):.1f}; {cap}; server CPU {stage['cpu_percent']:.0f} % "
            f"(100 % = one core; the clients' process {stage['client_cpu_percent']:.0f} %), "
            f"RSS {stage['rss_mb']:.0f} MB, USS {stage['uss_mb']:.0f} MB; "
            f"load average {stage['load_average']:.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30, help="client sessions at the end")
    parser.add_argument("--pages", type=int, default=2, help="Chromium pages")
    parser.add_argument("--stages", default=None,
                        help="client sessions at each stage, e.g. 0,10,20,30 (default: "
                             "0, a third, two thirds, all of --clients)")
    parser.add_argument("--seconds", type=float, default=20.0, help="window of each stage")
    parser.add_argument("--procs", type=int, default=2, help="--num-procs of the server")
    parser.add_argument("--min-fps", type=float, default=5.0,
                        help="a session below this at the last stage is starved (exit 1)")
    parser.add_argument("--json", default=None, help="also write the result to this file")
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        sys.exit(f"Chromium not found at {CHROMIUM}")
    if args.stages:
        stages = [int(s) for s in args.stages.split(",")]
    else:
        stages = sorted({0, args.clients // 3, 2 * args.clients // 3, args.clients})
    from playwright.sync_api import sync_playwright

    log_path = Path(tempfile.mkdtemp()) / "panel.log"
    with served(log_path, flags=classroom_flags(args.procs)) as server:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                result = run(browser, server.url, server.proc.pid, stages, args.pages,
                             args.seconds)
            finally:
                browser.close()
    result["server_errors"] = server.errors()
    last = result["stages"][-1]
    worst = min(last["page_fps"] + last["client_fps"])
    print(f"server: {result['workers']} worker processes; idle RSS "
          f"{result['rss_idle_mb']:.0f} MB, USS {result['uss_idle_mb']:.0f} MB; memory per "
          f"session: RSS {result['memory_per_session_mb'].get('rss_mb', math.nan):.1f} MB, "
          f"USS {result['memory_per_session_mb'].get('uss_mb', math.nan):.1f} MB")
    if "slider_ms" in result:
        print(f"slider → softmax map on page 1 with {last['sessions']} sessions: median "
              f"{result['slider_ms']:.0f} ms ({result['slider_ms_all']}, misses "
              f"{result['slider_misses']}); load average {result['slider_load_average']:.1f}")
    errors = (result["server_errors"] + result["page_errors"]
              + [e for s in result["stages"] for e in s["client_errors"]])
    print(f"worst session at the last stage: {worst:.1f} frames/s (starved below "
          f"{args.min_fps}); errors: {len(errors)}; server log {log_path}")
    for line in errors[:20]:
        print("  " + line)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if worst >= args.min_fps and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
