"""Server plumbing of the dashboard: what a long-running ``panel serve`` process needs.

Nothing here knows what a dashboard shows; :class:`app.dashboard.Dashboard` calls it.

* A registry of the sessions whose periodic callback runs (:func:`register_session`,
  :func:`forget_session`, read by :func:`running_dashboards` / :func:`live_callbacks`).
* :func:`install_closed_socket_filter`: an asyncio exception handler dropping only the
  writes to a websocket that just closed (a page closed while a frame was on its way).
* :func:`schedule_memory_return` / :func:`return_memory`: after sessions end, collect
  their reference cycles and hand the freed heap back to the OS (glibc ``malloc_trim``).
* :func:`release_links`: drop a closed session's widgets from Panel's class-level
  registry of JS callbacks, which would otherwise keep the whole session alive.
* :func:`locked`: run a button's callback under the session's document lock.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import weakref
from collections.abc import Callable

#: Sessions of this process that started a periodic callback: objects with a
#: ``periodic_callback`` attribute (a ``panel.io.callbacks.PeriodicCallback`` or None).
#: Only :func:`register_session` and :func:`forget_session` change it.
_WITH_CALLBACK: weakref.WeakSet = weakref.WeakSet()

#: Seconds after a session ends before its memory is handed back to the OS (by then
#: Bokeh has dropped the session's document; several sessions ending together share one).
MEMORY_RETURN_DELAY = 2.0
_memory_return_pending = False


# -- callbacks that change Bokeh models ----------------------------------------------
def locked(callback: Callable) -> Callable:
    """``callback`` wrapped to run under the session's document lock.

    Panel runs a button's click handler *outside* Bokeh's document lock whenever a
    widget change is still pending (typed text, a slider just moved: the click then
    waits for that change in an asyncio task of its own). A handler changing Bokeh
    models there fails in the server (``RuntimeError: _pending_writes should be
    non-None …``) half-way through, leaving the plots of the old run. The wrapper
    schedules the call on the session's next tick, which holds the lock; without a
    server session (tests, a notebook) it calls at once.

    Parameters
    ----------
    callback : callable
        Called with the wrapper's arguments; its return value is returned only when it
        runs at once (else None).

    Returns
    -------
    callable
    """
    import panel as pn

    @functools.wraps(callback)
    def run(*args, **kwargs):
        doc = pn.state.curdoc
        session = getattr(getattr(doc, "session_context", None), "session", None)
        if session is None:
            return callback(*args, **kwargs)
        pn.state.execute(functools.partial(callback, *args, **kwargs), schedule=True)
        return None

    return run


# -- registry of sessions with a periodic callback ------------------------------------
def register_session(session) -> None:
    """Record ``session`` as one that started a periodic callback.

    Parameters
    ----------
    session : object
        Has a ``periodic_callback`` attribute (``PeriodicCallback`` or None); held by a
        weak reference, so a registered session is still freed when it ends.
    """
    _WITH_CALLBACK.add(session)
    watch_stranded_writes()


def forget_session(session) -> None:
    """Remove ``session`` from the registry (no error if it is not there)."""
    _WITH_CALLBACK.discard(session)


def running_dashboards() -> tuple:
    """The registered sessions (dashboards) whose periodic callback is running.

    Returns
    -------
    tuple
        In no particular order.
    """
    return tuple(d for d in list(_WITH_CALLBACK)
                 if d.periodic_callback is not None and d.periodic_callback.running)


def live_callbacks() -> int:
    """Number of periodic callbacks of dashboards running in this process."""
    return len(running_dashboards())


# -- writes to a closed websocket -----------------------------------------------------
def closed_socket_filter(loop, context) -> None:
    """Asyncio exception handler dropping only writes to a websocket that just closed.

    Parameters
    ----------
    loop : asyncio.AbstractEventLoop
    context : dict
        As given to an exception handler (``"exception"``, ``"message"``, ...).

    Notes
    -----
    Any other exception goes to the handler the loop had before
    :func:`install_closed_socket_filter`, or to the loop's default handler.
    """
    from tornado.iostream import StreamClosedError
    from tornado.websocket import WebSocketClosedError

    if isinstance(context.get("exception"), (WebSocketClosedError, StreamClosedError)):
        return  # a page closed while a frame was on its way: there is no one to deliver it to
    previous = getattr(loop, "_dashboard_previous_handler", None)
    if previous is not None:
        previous(loop, context)
    else:
        loop.default_exception_handler(context)


def install_closed_socket_filter() -> None:
    """Make :func:`closed_socket_filter` the exception handler of the running loop.

    Does nothing without a running loop, or if it is installed already; the loop's
    previous handler is kept (as ``loop._dashboard_previous_handler``) and still
    receives every other exception.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    if loop.get_exception_handler() is not closed_socket_filter:
        loop._dashboard_previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(closed_socket_filter)


# -- Panel's queued writes -------------------------------------------------------------
#: Seconds between two looks for changes Panel queued for a page and left unsent.
STRANDED_CHECK_EVERY = 0.25
_stranded_loop = None  # the loop :func:`watch_stranded_writes` looks on (None: not looking)


def resend_stranded_writes(queued=None, flagged=None, send=None) -> int:
    """Hand the changes Panel queued for a page, and left unsent, to its sender again;
    return the number of pages whose changes were stranded.

    Panel writes a session's changes straight to the page's websocket. While a write is
    under way it queues later changes (``panel.io.document._WRITE_MSGS``) behind a flag
    (``_WRITE_BLOCK``) for a task that sends them. A sending task that ends clears the
    flag even when a newer batch was queued meanwhile, and that batch's own task, finding
    the flag cleared, returns: the batch waits for the page's next change (Panel 1.9.4).
    A run's last frame and its end ("■ t = 20.0 / 20") were stranded so, with nothing
    after them: on a loaded machine about one tour step in twelve stayed at t = 14.4 of
    a run the server had ended at 20. A page is stranded exactly when it has queued
    changes and no flag (Panel sets the flag before it queues).

    ``queued``, ``flagged`` and ``send(doc)`` stand for Panel's queue, its flags and its
    sender (None: Panel's own).
    """
    if queued is None or flagged is None or send is None:
        try:
            from panel.io import document as panel_document

            queued, flagged = panel_document._WRITE_MSGS, panel_document._WRITE_BLOCK
            dispatch, sender = (panel_document._dispatch_write_task,
                                panel_document._dispatch_msgs)
        except (ImportError, AttributeError):  # a Panel without that queue: nothing to mend
            return 0

        def send(doc):
            dispatch(doc, sender, doc)
    stranded = [doc for doc in list(queued.keys()) if doc not in flagged]
    for doc in stranded:
        flagged[doc] = True
        send(doc)
    return len(stranded)


def watching_stranded_writes() -> bool:
    """Whether :func:`watch_stranded_writes` looks now."""
    return _stranded_loop is not None


def watch_stranded_writes() -> None:
    """Look for stranded changes (:func:`resend_stranded_writes`) every
    :data:`STRANDED_CHECK_EVERY` s on the running loop while a session is registered
    (started again by the next registration); nothing without a running loop."""
    global _stranded_loop
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    if _stranded_loop is loop:
        return
    _stranded_loop = loop

    def look():
        global _stranded_loop
        resend_stranded_writes()
        if _WITH_CALLBACK:
            loop.call_later(STRANDED_CHECK_EVERY, look)
        else:
            _stranded_loop = None

    loop.call_later(STRANDED_CHECK_EVERY, look)


# -- memory of ended sessions ---------------------------------------------------------
def schedule_memory_return() -> None:
    """Collect the closed sessions' objects and give freed heap back to the OS, soon.

    A dashboard holds reference cycles (param watchers, Bokeh models), freed only by the
    cyclic collector; and glibc keeps freed heap unless trimmed. Without both, a server
    that served many sessions holds the memory of its busiest moment.

    Calls :func:`return_memory` :data:`MEMORY_RETURN_DELAY` seconds later on the running
    loop, once for all the sessions ending meanwhile; does nothing without a running loop.
    """
    global _memory_return_pending
    if _memory_return_pending:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    _memory_return_pending = True
    loop.call_later(MEMORY_RETURN_DELAY, return_memory)


def return_memory() -> None:
    """Run the cyclic garbage collector, then ``malloc_trim(0)`` (glibc only; else nothing)."""
    global _memory_return_pending
    _memory_return_pending = False
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


# -- Panel's registry of JS callbacks -------------------------------------------------
def release_links(layout) -> None:
    """Drop the objects of ``layout`` from Panel's class-level registry of JS callbacks.

    ``EditableFloatSlider`` links its input box to its slider with a
    ``panel.links.Callback`` kept in ``Callback.registry``, a WeakKeyDictionary whose
    values refer back to their keys: without this the whole dashboard of every closed
    session would stay in memory.

    Parameters
    ----------
    layout : panel.viewable.Viewable or None
        The session's layout (every object ``layout.select()`` finds); None: nothing.
    """
    from panel.links import Callback

    if layout is None:
        return
    mine = {id(obj) for obj in layout.select()}
    for source in [s for s in list(Callback.registry) if id(s) in mine]:
        Callback.registry.pop(source, None)
