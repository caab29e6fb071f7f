"""The races a served app's log may show that no code of the app runs in (tornado, Dask
and Bokeh noticing a closed connection), and :func:`without_logged_races`, which leaves
out exactly those blocks: the browser tier checks the rest of the shared server's log for
tracebacks (``tests/ui/conftest.py``); ``tests/test_server_log.py`` checks the filter on
the forms seen in real logs, and that it keeps any other traceback."""

import re

#: tornado's write of a message racing a browser that closed its socket (a page closing
#: mid-stream), logged by asyncio as a task exception never retrieved; with its log line
#: (its time, level and logger's prefix).
_CLOSED_SOCKET_RACE = re.compile(
    r"[^\n]*Task exception was never retrieved\nfuture: <Task finished name='[^']*' "
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
#: the ``CommClosedError`` that ends its traceback, with or without the tornado
#: ``StreamClosedError`` chained before it (both forms seen).
_DASK_BATCHED_CLOSE_RACE = re.compile(
    r"[^\n]*Batched Comm Closed <TCP \(closed\) Scheduler connection to worker[^\n]*\n"
    r"(?:Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+"
    r"tornado\.iostream\.StreamClosedError[^\n]*\n\n"
    r"The above exception was the direct cause of the following exception:\n\n)?"
    r"Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+"
    r"distributed\.comm\.core\.CommClosedError[^\n]*\n")
#: Dask's races, logged only as the server stops (its Sweep tab's cluster closing).
_DASK_RACES = (_DASK_HEARTBEAT_RACE, _DASK_BATCHED_CLOSE_RACE)
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


def without_pages_closing(text: str) -> str:
    """``text`` (one test's share of a server's log) without the connection-lost noise of
    pages closing: tornado's closed-socket race with its log line, and Bokeh's
    closed-session assertion. Dask's blocks are kept: they come only as the server stops."""
    return _without_closed_session_race(_CLOSED_SOCKET_RACE.sub("", text))


def without_logged_races(text: str) -> str:
    """``text`` (a server's whole log, once it stopped) without the noise of pages closing
    (:func:`without_pages_closing`) and Dask's races as its cluster closed
    (:data:`_DASK_RACES`); all else is kept."""
    for race in _DASK_RACES:
        text = race.sub("", text)
    return without_pages_closing(text)
