"""Browser tier: serve the app with ``panel serve`` and drive it in headless Chromium.

Uses Debian's Chromium at /usr/bin/chromium (Playwright's own browser download is
not used); every test here is marked ``ui`` and skipped when Chromium is missing.
"""

import os
import re

import pytest
from server_log import without_logged_races, without_pages_closing
from serving import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, served


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
    text = without_logged_races(srv.log())
    assert "Traceback" not in text, text


@pytest.fixture(scope="session")
def server(app_server):
    """URL of the shared server (:func:`app_server`)."""
    return app_server.url


class LogSince:
    """What a server logged since this object was made (one test's share of the log of a
    server shared by many), less the connection-lost noise of pages closing that the
    session's own check ignores too."""

    def __init__(self, server):
        self.server, self.mark = server, len(server.log())

    def text(self) -> str:
        return without_pages_closing(self.server.log(self.mark))

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
