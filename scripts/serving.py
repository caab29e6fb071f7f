"""Serve the dashboard and open it in Chromium: shared by the scripts and the browser tests.

* :func:`served` runs ``panel serve app/main.py`` with the README's flags on a free
  loopback port (closed pages' sessions are destroyed after a second) and returns once
  the page answers; the server stops when the ``with`` block ends.
* :data:`CHROMIUM`, :data:`CHROMIUM_ARGS`, :data:`VIEWPORT`: Debian's Chromium, headless
  (Playwright's own browser download is never used).
* :data:`COUNT_CHANGES`: page script counting the attention heatmap's data changes.
* :func:`classroom_flags`: the README's flags for a class (processes, idle-session
  expiry, token lifetime), used by ``scripts/classroom.py`` and its test.

The scripts import it directly (``scripts/`` is on ``sys.path`` when one runs), and
so do the tests (``pythonpath`` in pyproject.toml).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1700, "height": 1350}
#: The Inertial lab's status once its first preset (the momentum base case) has run: the
#: lab is built (it is built when its tab is first shown).
LAB_BUILT = re.compile(r"f − f\* at t = ")

#: Counts the changes of the attention heatmap's ColumnDataSource over ``ms``.
COUNT_CHANGES = """
async (ms) => {
  const doc = Bokeh.documents[0];
  const src = [...doc._all_models.values()].find(
      m => m.data instanceof Object && "image" in m.data);
  let n = 0;
  src.properties.data.change.connect(() => { n += 1; });
  await new Promise(r => setTimeout(r, ms));
  return n;
}
"""


#: Flags of the test servers: closed pages' sessions (and their periodic callbacks) go
#: away after a second.
QUICK_EXPIRY = ("--check-unused-sessions", "1000", "--unused-session-lifetime", "1000")


def classroom_flags(procs: int = 2) -> tuple[str, ...]:
    """The README's ``panel serve`` flags for a class (besides address, port, origins).

    ``procs`` worker processes (one per core: each runs its sessions on one event loop);
    a session whose page is closed is dropped within 15 s of its last connection
    (checked every 5 s); a page's session token creates a session only within 5 minutes
    of loading it; the websocket is pinged every 10 s (a proxy or a laptop's Wi-Fi does
    not silently drop an idle connection).
    """
    return ("--num-procs", str(procs),
            "--check-unused-sessions", "5000", "--unused-session-lifetime", "15000",
            "--session-token-expiration", "300", "--keep-alive", "10000")


def _app_arguments(max_fps: float | None, steps_per_frame: int | None) -> tuple[str, ...]:
    """``--args …`` of ``app/main.py`` for the sessions' defaults given (none: empty)."""
    given = (("--max-fps", max_fps), ("--steps-per-frame", steps_per_frame))
    pairs = [(flag, f"{value:g}") for flag, value in given if value is not None]
    return ("--args", *(part for pair in pairs for part in pair)) if pairs else ()


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts connections on the loopback ``port``."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def reachable(url: str, timeout: float = 10) -> bool:
    """Whether ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


@dataclass
class Server:
    """A running ``panel serve``: page URL, port, process and log file."""

    url: str
    port: int
    proc: subprocess.Popen
    log_path: Path

    def log(self, since: int = 0) -> str:
        """The log, from character ``since`` on (``len(server.log())`` taken earlier: what
        was logged since then, e.g. during one test on a server shared by many)."""
        return self.log_path.read_text()[since:]

    def errors(self, since: int = 0) -> list[str]:
        """The log's lines with a Traceback or an ERROR (from character ``since`` on)."""
        return [line for line in self.log(since).splitlines()
                if "Traceback" in line or "ERROR" in line]


@contextlib.contextmanager
def served(log_path: Path, app: str = "app/main.py", timeout: float = 180,
           root: Path = ROOT, flags: tuple[str, ...] = QUICK_EXPIRY,
           env: dict[str, str] | None = None,
           max_fps: float | None = None,
           steps_per_frame: int | None = None) -> Iterator[Server]:
    """``panel serve app`` (a path relative to ``root``, the working directory) with the
    README's flags on a free loopback port, and ``flags`` (default
    :data:`QUICK_EXPIRY`; :func:`classroom_flags` for a class); ``env``: environment
    variables added for the server (e.g. ``PANEL_LOG_LEVEL=info``: sessions created and
    destroyed are logged); ``max_fps``, ``steps_per_frame``: the sessions' default frame
    cap and speed (the app's ``--args --max-fps``, ``--steps-per-frame``; ``None``: the
    app's own).

    Yields once the page answers (``RuntimeError`` with the log if it does not within
    ``timeout`` s); terminates the server on exit. The log goes to ``log_path``.
    """
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("panel")), "serve", app,
             "--address", "127.0.0.1", "--port", str(port),
             "--allow-websocket-origin", f"127.0.0.1:{port}",
             "--allow-websocket-origin", f"localhost:{port}", *flags,
             *_app_arguments(max_fps, steps_per_frame)],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        server = Server(f"http://127.0.0.1:{port}/{Path(app).stem}", port, proc,
                        Path(log_path))
        try:
            # Wait for the port, then ask for the page once with all the time left: the
            # first page builds a whole session (seconds of CPU, far more on a loaded
            # machine), which a request given up and sent again would only build again.
            deadline = time.monotonic() + timeout
            while not (listening(port) and reachable(
                    server.url, timeout=max(deadline - time.monotonic(), 1))):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"panel serve did not start:\n{server.log()}")
                time.sleep(0.3)
            yield server
        finally:
            stop(proc)


def stop(proc) -> None:
    """Terminate a server process, then whatever of its process tree outlives it.

    The server alone is signalled first: it closes its own children (the embedded dask
    cluster's worker processes, which log tracebacks when killed under their scheduler).
    The workers of ``--num-procs`` outlive their parent; they are terminated after it,
    and anything still alive 10 s later is killed.
    """
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, survivors = psutil.wait_procs(tree, timeout=0.5)
    for child in survivors:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()
    _, alive = psutil.wait_procs(survivors, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
