"""Fast tier: the filter that leaves the races of closing connections out of a served
app's log (``tests/server_log.py``) removes the forms seen in real logs of the browser
tier and keeps every other traceback: too narrow, the tier fails on noise (a run here
failed on the chained form of Dask's batched-send race); too broad, it hides the app's
own errors."""

from server_log import without_logged_races, without_pages_closing

#: Dask's scheduler writing to a worker that closed first, as logged in a browser-tier run
#: (paths shortened): the tornado error chained before distributed's.
BATCHED_CHAINED = """\
2026-12-07 00:43:41,603 Batched Comm Closed <TCP (closed) Scheduler connection to worker \
local=tcp://127.0.0.1:45805 remote=tcp://127.0.0.1:38586>
Traceback (most recent call last):
  File "distributed/comm/tcp.py", line 298, in write
    raise StreamClosedError()
tornado.iostream.StreamClosedError: Stream is closed

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "distributed/batched.py", line 115, in _background_send
    nbytes = yield coro
             ^^^^^^^^^^
  File "distributed/comm/tcp.py", line 137, in convert_stream_closed_error
    raise CommClosedError(f"in {obj}: {exc}") from exc
distributed.comm.core.CommClosedError: in <TCP (closed) Scheduler connection to worker \
local=tcp://127.0.0.1:45805 remote=tcp://127.0.0.1:38586>: Stream is closed
"""
#: The same race with distributed's error alone.
BATCHED_PLAIN = """\
2026-12-06 22:01:12,001 Batched Comm Closed <TCP (closed) Scheduler connection to worker \
local=tcp://127.0.0.1:1 remote=tcp://127.0.0.1:2>
Traceback (most recent call last):
  File "distributed/batched.py", line 115, in _background_send
    nbytes = yield coro
distributed.comm.core.CommClosedError
"""
HEARTBEAT = """\
2026-12-06 22:01:12,002 - distributed.worker - ERROR - Failed to communicate with \
scheduler during heartbeat.
Traceback (most recent call last):
  File "distributed/comm/tcp.py", line 225, in read
    frames_nosplit_nbytes_bin = await stream.read_bytes(fmt_size)
tornado.iostream.StreamClosedError: Stream is closed
distributed.comm.core.CommClosedError: in <TCP (closed) ConnectionPool.heartbeat_worker \
local=tcp://127.0.0.1:3 remote=tcp://127.0.0.1:4>: Stream is closed
"""
CLOSED_SOCKET = """\
2026-12-06 22:01:12,003 Task exception was never retrieved
future: <Task finished name='Task-9' coro=<WebSocketProtocol13.write_message.<locals>.\
wrapper() done, defined at tornado/websocket.py:1086> exception=WebSocketClosedError()>
Traceback (most recent call last):
  File "tornado/websocket.py", line 1088, in wrapper
    raise WebSocketClosedError()
tornado.websocket.WebSocketClosedError
"""
DETACHED_SESSION = """\
Traceback (most recent call last):
  File "bokeh/server/connection.py", line 85, in detach_session
    assert self._session is not None
AssertionError
"""
#: Errors of the app's own code: never left out.
APP_ERROR = """\
2026-12-06 22:01:13,000 Error running application handler
Traceback (most recent call last):
  File "app/mainview/timeseries.py", line 140, in flush
    self.source.stream(rows)
ValueError: must stream updates to all existing columns
"""
APP_ASSERTION = """\
Traceback (most recent call last):
  File "app/serving/run_end.py", line 30, in _end_run
    assert self.sim is not None
AssertionError
"""
QUIET = "2026-12-06 22:01:10,000 WebSocket connection closed: code=1001, reason=None\n"


def test_the_races_of_closing_connections_are_left_out_and_nothing_else():
    races = (BATCHED_CHAINED, BATCHED_PLAIN, HEARTBEAT, CLOSED_SOCKET, DETACHED_SESSION)
    for race in races:
        assert without_logged_races(QUIET + race + QUIET) == QUIET + QUIET, race
    for error in (APP_ERROR, APP_ASSERTION):
        assert without_logged_races(error) == error
    log = QUIET.join(races) + APP_ERROR + BATCHED_CHAINED + APP_ASSERTION
    assert without_logged_races(log) == QUIET * (len(races) - 1) + APP_ERROR + APP_ASSERTION


def test_a_test_s_share_of_the_log_leaves_out_only_pages_closing():
    """While the server runs, only a closing page's noise is left out: Dask's races come
    as the server stops, and one seen mid-test is worth a failure."""
    assert without_pages_closing(QUIET + CLOSED_SOCKET + DETACHED_SESSION) == QUIET
    for kept in (BATCHED_CHAINED, HEARTBEAT, APP_ERROR, APP_ASSERTION):
        assert without_pages_closing(kept) == kept
