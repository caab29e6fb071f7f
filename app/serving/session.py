"""The dashboard's life in one browser session: its periodic callback, from load to close.

:class:`Session` is the part of :class:`app.serving.playback.Playback` (and so of
:class:`app.dashboard.Dashboard`) that starts the session's periodic callback when the
page loads, turns flow control on in a server session (the page then acknowledges the
frames it painted), pushes the changes by hand in a Jupyter kernel, and drops the run
when the session is destroyed (:meth:`Session.close`).
"""

from __future__ import annotations

import asyncio

import panel as pn
import param
from panel.io.callbacks import PeriodicCallback

from . import server


class Session(param.Parameterized):
    """The periodic callback of one session and the session's end.

    A mixin of :class:`app.serving.playback.Playback`, which provides ``period``,
    ``tick``, ``acknowledge``, ``_sync_callback`` and (from the dashboard) ``heatmaps``,
    ``history``, ``reference`` and ``_layout``.
    """

    def _init_session(self) -> None:
        """The session's own state (called by ``Playback._init_playback``)."""
        self._callback = None
        self._closed = False  # the session was destroyed (no frame is computed after)
        self._flow_control = self._notebook = False
        self._session_context = None

    @property
    def periodic_callback(self):
        """This session's periodic callback (None before the page loaded and after it
        closed; the registry of :mod:`app.serving.server` reads it).

        Set when the page loads; anything with a ``running`` flag (and ``start()``,
        ``stop()`` and a ``period`` where those are used) may stand in for it.
        """
        return self._callback

    @periodic_callback.setter
    def periodic_callback(self, callback) -> None:
        self._callback = callback

    @property
    def flow_control(self) -> bool:
        """Whether a page acknowledges the frames sent (a server session, from the page's
        load on): at most ``MAX_IN_FLIGHT`` frames go unacknowledged, the frame cap and
        the callback's period follow the server's load (:mod:`app.serving.pacing`), and a
        changed setting's frame is sent at once."""
        return self._flow_control

    @flow_control.setter
    def flow_control(self, on: bool) -> None:
        self._flow_control = bool(on)

    def _on_load(self):
        """Start this session's periodic callback (server or Jupyter kernel)."""
        doc = pn.state.curdoc
        if doc is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return  # a plain script or a test: drive the run with tick()
            self._notebook = True  # Jupyter: Bokeh model changes are pushed by hand
        elif doc.session_context:
            # Server session: the page acknowledges frames (flow control).
            self._flow_control = True
            self._session_context = doc.session_context
            self.acknowledge(0)  # (the acknowledgement clock starts now)
            self.heatmaps.ack.on_change("tags", self._on_ack)
            pn.state.on_session_destroyed(lambda session_context: self.close())
            server.install_closed_socket_filter()
        # Panel's own periodic callback, but neither logged nor counted as "busy" at
        # each call: both cost the server a few times the check of a tick that sends
        # nothing (most calls), for every session (a line of log per call at the
        # server's default log level, and Panel's busy state set and reset).
        self._callback = PeriodicCallback(callback=self.tick, period=self.period,
                                          log=False, background=True)
        self._sync_callback()  # started while playing with the main tab shown
        server.register_session(self)

    def _push_notebook(self):
        if self._notebook and self._layout is not None:
            pn.io.push_notebook(self._layout)

    def close(self) -> None:
        """The page is gone for good: stop the callback and drop the run (called when the
        page's session is destroyed); no frame is computed after."""
        if self._callback is not None:
            self._callback.stop()
            self._callback = None
        server.forget_session(self)
        self._closed = True
        self._session_context = None
        server.release_links(self._layout)  # its widgets' JS links would keep it alive
        self.reference = None
        self.history.clear()
        server.schedule_memory_return()
