"""Browser tier: serve the app with ``panel serve`` and drive it in headless Chromium.

Uses Debian's Chromium at /usr/bin/chromium (Playwright's own browser download is
not used); every test here is marked ``ui`` and skipped when Chromium is missing.
"""

import os
import re

import pytest
from serving import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, served

_CLOSED_SOCKET_RACE = re.compile(
    r"Task exception was never retrieved\nfuture: <Task finished name='[^']*' "
    r"coro=<WebSocketProtocol13\.write_message\.<locals>\.wrapper\(\).*?"
    r"tornado\.websocket\.WebSocketClosedError\n", re.DOTALL)
#: Dask's worker logging a heartbeat that raced its scheduler's close (the Sweep tab's
#: cluster closed with the server at the end of the session; distributed logs it at ERROR
#: with the chained ``StreamClosedError``/``CommClosedError`` tracebacks; nothing of the
#: app runs there). Only this block: from its log line to the heartbeat's CommClosedError.
_DASK_HEARTBEAT_RACE = re.compile(
    r"[^\n]*distributed\.worker - ERROR - Failed to communicate with scheduler during "
    r"heartbeat\.\n.*?distributed\.comm\.core\.CommClosedError: in <TCP \(closed\) "
    r"ConnectionPool\.heartbeat_worker[^\n]*\n", re.DOTALL)
#: Dask's scheduler logging a batched send to a worker that closed first, as the Sweep
#: tab's cluster closes with the server at the end of the session (distributed's own
#: ``BatchedSend``; nothing of the app runs there). Only this block: from its log line to
#: the ``CommClosedError`` that ends its traceback.
_DASK_BATCHED_CLOSE_RACE = re.compile(
    r"[^\n]*Batched Comm Closed <TCP \(closed\) Scheduler connection to worker[^\n]*\n"
    r"Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+"
    r"distributed\.comm\.core\.CommClosedError\n")
#: The blocks above, each a race logged by tornado or Dask with no code of the app running:
#: left out of the shared server's log before it is checked for tracebacks.
_LOGGED_RACES = (_CLOSED_SOCKET_RACE, _DASK_HEARTBEAT_RACE, _DASK_BATCHED_CLOSE_RACE)
#: A traceback ending in an ``AssertionError`` (its frames are the indented lines).
_ASSERTION_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):\n(?:[ \t].*\n)+AssertionError\n")


def _without_closed_session_race(text: str) -> str:
    """``text`` without Bokeh's tracebacks of a message handled, or a close noticed, on a
    connection whose session was already detached (``assert self._session is not None``
    in ``bokeh/server/connection.py``): a page closing while its last acknowledgement
    is in flight. Bokeh raises it in its own protocol handler, before any code of the
    app runs (seen once in six full runs of the browser tier; bokeh/bokeh#14720 is the
    same family of connection-lost noise)."""
    return _ASSERTION_TRACEBACK.sub(
        lambda m: "" if ("bokeh/server/connection.py" in m.group(0)
                         and "assert self._session is not None" in m.group(0))
        else m.group(0), text)


def pytest_collection_modifyitems(config, items):
    if not os.path.exists(CHROMIUM):
        skip = pytest.mark.skip(reason=f"Chromium not found at {CHROMIUM}")
        for item in items:
            if "ui" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": CHROMIUM_ARGS,
    }


#: Milliseconds a page may take to load (Playwright's default is 30 s). A page is a
#: session the server builds in full (seconds of CPU); on a loaded machine one load took
#: over 30 s, and a load given up does not stop the server building it, so every later
#: load of the run queued behind the ones abandoned and timed out too (14 tests in a row).
NAVIGATION_TIMEOUT = 120_000


@pytest.fixture
def context(context):
    """pytest-playwright's context, whose pages wait :data:`NAVIGATION_TIMEOUT` to load."""
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT)
    return context


@pytest.fixture(scope="session")
def base_url():
    """Overrides pytest-base-url's fixture, whose definition warns under pytest 9
    (PytestRemovedIn10Warning, an error here); the tests pass full URLs."""
    return None


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": VIEWPORT}


#: The shared server's frame cap and speed (``--args --max-fps … --steps-per-frame …``):
#: the default run's 200 steps/s (5 steps a frame at 40 frames/s) would keep headless
#: Chromium drawing a core's worth for each page. Four frames/s of fifteen steps draw the
#: same runs (a row every fifteen steps) for about a tenth of that and still advance 60
#: steps/s, so a test waiting for a run's time waits as long as at twelve frames/s of five
#: (the tier took 578 s at 12 frames/s of 5 steps, 500 s at 6 of 10). The frame-rate tests
#: run on servers of their own, or ask for their own cap in their URL.
MAX_FPS, STEPS_PER_FRAME = 4, 15


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """The one ``panel serve app/main.py`` (README flags, :func:`serving.served`, frames
    capped at :data:`MAX_FPS` of :data:`STEPS_PER_FRAME` steps) that the browser tier
    shares: a :class:`serving.Server` (URL, process, log). A test that reads the log reads
    what was logged during it (``Server.log(since)``, ``errors(since)``). At the end of
    the session its log has no Traceback."""
    with served(tmp_path_factory.mktemp("serve") / "panel.log", max_fps=MAX_FPS,
                steps_per_frame=STEPS_PER_FRAME) as srv:
        yield srv
    # tornado's write racing a browser closing its socket, Dask's cluster closing with the
    # server, Bokeh's handler on a detached session: nothing the app does or can catch;
    # ignore only those blocks
    text = srv.log()
    for race in _LOGGED_RACES:
        text = race.sub("", text)
    text = _without_closed_session_race(text)
    assert "Traceback" not in text, text


@pytest.fixture(scope="session")
def server(app_server):
    """URL of the shared server (:func:`app_server`)."""
    return app_server.url


#: The closed-socket race with the line that logged it (its level and logger's prefix).
_CLOSED_SOCKET_LINE = re.compile(r"[^\n]*" + _CLOSED_SOCKET_RACE.pattern, re.DOTALL)


class LogSince:
    """What a server logged since this object was made (one test's share of the log of a
    server shared by many), less the connection-lost noise of pages closing that the
    session's own check ignores too."""

    def __init__(self, server):
        self.server, self.mark = server, len(server.log())

    def text(self) -> str:
        return _without_closed_session_race(
            _CLOSED_SOCKET_LINE.sub("", self.server.log(self.mark)))

    def errors(self) -> list[str]:
        """The lines with a Traceback or an ERROR."""
        return [line for line in self.text().splitlines()
                if "Traceback" in line or "ERROR" in line]


@pytest.fixture
def server_log(app_server):
    """:class:`LogSince` of the shared server, from the start of the test."""
    return LogSince(app_server)


def _collect_errors(page, errors: list) -> None:
    """Append ``page``'s console errors and uncaught page errors to ``errors``."""
    def on_console(msg):
        if msg.type == "error":
            errors.append(f"{msg.text} at {msg.location.get('url', '?')}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))


def _leave(page) -> None:
    """Pause a playing run and leave the page, so that the server is not writing a frame
    to a socket closing under it (tornado logs that with a traceback)."""
    try:
        if page.get_by_text("▶ playing").count():
            page.get_by_role("button", name=re.compile("Play")).click(timeout=2000)
            page.wait_for_timeout(300)
        page.goto("about:blank")
    except Exception:  # the page may already be gone; closing it is all that is left
        pass


class SharedPage:
    """A page loaded once and shared by the tests of a module (:func:`module_page`): a
    page load is most of a browser test's cost. ``errors``: its console errors since it
    was opened (a test asserts it empty); :meth:`open` loads a URL only when the page
    does not show it yet (or ``fresh``)."""

    def __init__(self, page):
        self.page, self.errors, self.url = page, [], None
        _collect_errors(page, self.errors)

    def open(self, url: str, fresh: bool = False):
        if fresh or url != self.url:
            self.page.goto(url)
            self.page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0",
                                        timeout=60000)
            self.page.wait_for_selector(".bk-Canvas", timeout=60000)
            self.url = url
        return self.page

    def forget(self) -> None:
        """The page's state is no longer its URL's: the next :meth:`open` reloads."""
        self.url = None


@pytest.fixture(scope="module")
def module_page(browser):
    """A :class:`SharedPage` for the tests of one module, in a context of its own (the
    tier's viewport); left and closed after the module's last test."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT)
    shared = SharedPage(context.new_page())
    yield shared
    _leave(shared.page)
    context.close()


@pytest.fixture
def console_errors(page):
    """Console errors and uncaught page errors of ``page`` (asserted empty by the tests).

    On teardown the run is paused and the page left, so that the server is not
    writing a frame to a socket closing under it (tornado logs that with a traceback).
    """
    errors = []
    _collect_errors(page, errors)
    yield errors
    _leave(page)
