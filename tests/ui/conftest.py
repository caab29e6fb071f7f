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


@pytest.fixture(scope="session")
def base_url():
    """Overrides pytest-base-url's fixture, whose definition warns under pytest 9
    (PytestRemovedIn10Warning, an error here); the tests pass full URLs."""
    return None


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": VIEWPORT}


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """URL of ``panel serve app/main.py`` (README flags) on a free port; its log has no
    Traceback."""
    with served(tmp_path_factory.mktemp("serve") / "panel.log") as srv:
        yield srv.url
    # Tornado logs a write racing a browser closing its socket (nothing the app does
    # or can catch: the write is an internal task of tornado's websocket); ignore only that.
    text = _without_closed_session_race(_CLOSED_SOCKET_RACE.sub("", srv.log()))
    assert "Traceback" not in text, text


@pytest.fixture
def console_errors(page):
    """Console errors and uncaught page errors of ``page`` (asserted empty by the tests).

    On teardown the run is paused and the page left, so that the server is not
    writing a frame to a socket closing under it (tornado logs that with a traceback).
    """
    errors = []

    def on_console(msg):
        if msg.type == "error":
            errors.append(f"{msg.text} at {msg.location.get('url', '?')}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield errors
    try:
        if page.get_by_text("▶ playing").count():
            page.get_by_role("button", name=re.compile("Play")).click(timeout=2000)
            page.wait_for_timeout(300)
        page.goto("about:blank")
    except Exception:  # the page may already be gone; closing it is all that is left
        pass
