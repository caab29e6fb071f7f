"""Running the dashboard's simulation: ticks, frames and the status line.

:class:`Playback` is the part of :class:`app.dashboard.Dashboard` that advances the run:
one periodic callback per browser session (started and stopped by
:class:`app.serving.session.Session`); each tick advances ``steps_per_frame`` steps,
builds one frame and pushes it into the panels' ``ColumnDataSource``s under one document
hold. Frames are rate-capped and flow-controlled (the page acknowledges them), and a run
that fails or diverges stops with a message; only finite numbers reach the page.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from types import MappingProxyType

import numpy as np
import panel as pn
import param

from app.models import COMPARISON_MODEL, not_applicable
from dynamics import DIVERGED, FAILED, RUNNING

from . import pacing, server
from .run_end import RunEnd
from .session import Session

#: Frames sent to the browser and not yet acknowledged before a tick is skipped (each
#: queued frame delays what a slider change shows: 2 keeps the page busy and the
#: slider latency near one frame time plus a tick).
MAX_IN_FLIGHT = 2
#: Seconds without acknowledgement after which frames are sent anyway.
ACK_TIMEOUT = 1.0
#: Seconds between status-line refreshes while playing (a DOM change costs the page a restyle).
STATUS_EVERY = 1.0
STATUS_STYLE = MappingProxyType({
    "font-family": "monospace", "font-size": "13px", "background": "#f4f6f8",
    "border-left": "4px solid #2c7fb8", "padding": "0 8px"})
STOPPED_STYLE = MappingProxyType(
    {**STATUS_STYLE, "background": "#fdecea", "border-left": "4px solid #d7301f"})


def frame_is_finite(frame, skip: Iterable[str] = ()) -> bool:
    """Whether every array and every diagnostic of ``frame`` not in ``skip`` is finite.

    Parameters
    ----------
    frame : dynamics.Frame
    skip : iterable of str
        Diagnostics the model does not define (``spec.not_applicable``: NaN by design).

    Returns
    -------
    bool
    """
    arrays = (frame.features, frame.momenta, frame.attention, frame.softmax)
    if not all(np.all(np.isfinite(a)) for a in arrays):
        return False
    skip = frozenset(skip)
    return all(math.isfinite(v) for k, v in frame.diagnostics.items() if k not in skip)


def _average(old: float, new: float) -> float:
    """Exponential moving average (the first value is taken as is)."""
    return 0.9 * old + 0.1 * new if old else new


class Playback(RunEnd, Session):
    """Advancing the run: ticks, frames, flow control and the status line.

    A mixin of :class:`app.dashboard.Dashboard`, which provides ``settings``, ``sim``,
    ``reference``, the panels, ``history`` and ``_ready``; the run's end and Replay are
    :class:`app.serving.run_end.RunEnd`'s.
    """

    playing = param.Boolean(default=True, doc="Advance the run in the periodic callback.")
    steps_per_frame = param.Integer(
        default=5, bounds=(1, 1000), softbounds=(1, 100),
        doc="Integrator steps per displayed frame.")
    period = param.Integer(default=10, bounds=(5, 2000),
                           doc="Milliseconds between calls of the periodic callback.")
    max_fps = param.Number(default=40.0, bounds=(1.0, 120.0),
                           doc="Most frames per second the periodic callback sends.")
    def _init_playback(self) -> None:
        """The playback's own state (called first by the dashboard's ``__init__``)."""
        self._init_session()
        self._init_run_end()
        self._frame_id = self._acked = 0
        self._ack_time = self._last_frame = 0.0
        self._urgent = False  # a setting changed while playing: show it at the next tick
        self._ticks = deque(maxlen=30)
        self._last_status = 0.0
        self.tick_ms = self.compute_ms = 0.0
        self._shown = True  # the main tab is shown: the run advances only then

    def step_once(self) -> None:
        """Advance one frame (used by the Step button; works while paused)."""
        self.advance_frame()

    def tick(self) -> None:
        """The periodic callback: one frame, unless it is too early or the browser is behind.

        The callback runs every ``period`` ms but sends at most ``max_fps`` frames/s;
        on a server, at most :meth:`frame_cap` (lower when the server is loaded, see
        :mod:`app.serving.pacing`).

        With a browser attached (flow control on), at most ``MAX_IN_FLIGHT`` frames
        may be sent and not yet acknowledged by the page, which acknowledges a frame
        once it has painted it (:data:`app.mainview.heatmaps.ACK_ON_PAINT`), so a slow browser
        lowers the frame rate instead of building an ever-growing backlog of messages,
        and a changed setting's frame waits behind at most those frames.

        On a server the callback's period follows the cap (half a frame interval,
        :func:`app.serving.pacing.callback_period`), and a changed setting calls this at once
        (:meth:`Dashboard._refresh`) rather than at the next call.
        """
        now = time.perf_counter()
        urgent = self._urgent  # a changed setting: one frame skips the cap and one
        # place of the in-flight limit, so it does not wait behind the frame rate
        due = now
        if not urgent and self._callback is not None:
            cap = self.frame_cap()
            period = self._fit_period(cap)
            # half a callback period of slack, so a 40 frames/s cap is not rounded
            # down to the callback grid (10 ms period: 40 ms = 25 frames/s)
            if now - self._last_frame < 1.0 / cap - period / 2000:
                return
            # the frame counts as sent when it was due, one interval after the last,
            # unless this call is over half an interval late: a loaded loop calls late,
            # and each late call would otherwise push every later frame back
            due = max(self._last_frame + 1.0 / cap, now - 0.5 / cap)
        if self._flow_control:
            if self._closed:  # the page's session was destroyed
                return
            session = getattr(self._session_context, "session", None)
            if session is not None and session.connection_count == 0:
                return  # the page is gone: send nothing until the session ends
            behind = self._frame_id - self._acked
            if behind > MAX_IN_FLIGHT + urgent and now - self._ack_time < ACK_TIMEOUT:
                return
        self._urgent = False
        self._last_frame = due
        self.advance_frame()

    def _fit_period(self, cap: float) -> int:
        """Lengthen the server's periodic callback's period as the session's cap falls
        (:func:`app.serving.pacing.callback_period`); return the period now (ms)."""
        cb = self._callback
        current = getattr(cb, "period", self.period)
        if not self._flow_control:
            return current
        period = pacing.callback_period(cap, self.period, current)
        if period != current:
            cb.period = period  # Panel restarts the callback with the new period
        return period

    def frame_cap(self) -> float:
        """Most frames per second sent now: ``max_fps``, or on a server the adaptive
        per-session cap of :mod:`app.serving.pacing` (lower as the server's load grows)."""
        if not self._flow_control:
            return self.max_fps
        return pacing.governor(server.live_callbacks).cap(self.max_fps, self.tick_ms / 1e3)

    @property
    def frame_id(self) -> int:
        """The number of the last frame sent to the page (0 before the first): the page
        acknowledges a frame by its number (:meth:`acknowledge`)."""
        return self._frame_id

    def acknowledge(self, frame_id: int) -> None:
        """The page painted frame ``frame_id`` (and those before it): what its
        acknowledgement does. With flow control, at most :data:`MAX_IN_FLIGHT` frames
        after the last acknowledged one are sent, for :data:`ACK_TIMEOUT` s after it."""
        self._acked = max(self._acked, int(frame_id))
        self._ack_time = time.perf_counter()

    def _on_ack(self, attr, old, new):
        if new:
            self.acknowledge(new[0])

    @property
    def change_pending(self) -> bool:
        """Whether a changed setting's frame waits for the next tick (which sends it
        before the frame cap, :meth:`tick`)."""
        return self._urgent

    def advance_frame(self) -> None:
        """One frame: advance ``steps_per_frame`` steps (fewer at :attr:`run_end`, where
        the run pauses) and update every plot."""
        if self.sim.status != RUNNING:
            self.playing = False
            self._say_stopped()
            self.update_status(force=True)
            return
        left = self.steps_to_end()
        if left == 0:
            self._end_run()
            return
        start = time.perf_counter()
        try:
            self._apply_quench()
            n = self.steps_per_frame if left is None else min(self.steps_per_frame, left)
            k = self._quench_steps(n)
            if k is not None:  # a quench inside the frame: applied at its time
                self.sim.advance(k)
                self._apply_quench()
            self.sim.advance(n - (k or 0))
            frame = self.sim.frame()
            ref = None
            if self.reference is not None:
                self._sync_reference()
                if self.reference.status == RUNNING:  # a diverged reference stays put
                    self.reference.advance(n)
                ref = self.reference.frame()
            computed = time.perf_counter()
            with pn.io.hold():
                self._show(frame, ref)
            self._push_notebook()
        except Exception as err:  # one session's run stops; the server goes on
            self.playing = False
            self.sim.status = FAILED
            self.sim.message = (f"the run stopped at t = {self.sim.t:.4g} with an error: "
                                f"{type(err).__name__}: {err} (Reset to start again)")
            self._run_error = True
            self.notice = self.sim.message
            self.update_status(force=True)
            return
        now = time.perf_counter()
        self.compute_ms = _average(self.compute_ms, 1e3 * (computed - start))
        self.tick_ms = _average(self.tick_ms, 1e3 * (now - start))
        self._ticks.append(now)
        if self.sim.status != RUNNING:
            self.playing = False
            self._say_stopped()
        elif self.steps_to_end() == 0:
            self._end_run()
            return
        self.update_status(force=self.sim.status != RUNNING)

    def _show(self, frame, ref=None) -> None:
        if not frame_is_finite(frame, not_applicable(self.settings.model)):
            self.sim.status = DIVERGED
            self.sim.message = (f"diverged at t = {frame.t:.4g}: non-finite diagnostics; "
                                "the run stopped (Reset to start again)")
            return
        distance = None
        if ref is not None and self._reference_stopped(ref):
            ref = None
        if (ref is not None and frame_is_finite(ref, not_applicable(COMPARISON_MODEL))
                and ref.features.shape == frame.features.shape):
            distance = float(np.linalg.norm(frame.features - ref.features))
        else:
            ref = None
        if self.history and frame.t < self.history[-1].t:  # the run restarted
            self.timeseries.clear()
            self.trajectories.clear()
            self.history.clear()
        self.history.append(frame)
        self._frame_id += 1
        self.heatmaps.update(frame, self._frame_id, self.sim.settings.beta)
        # While playing smoothly, time series go in batches; otherwise at once.
        batched = self.playing and self.sim.status == RUNNING and self._flow_control
        self.timeseries.update(frame, distance, flush=not batched)
        self.timeseries.mark_changes(self.sim.changes)
        self.trajectories.update(frame, ref)
        self.clustering.update(frame, self.sim)
        self.real_heads.update(frame)
        self._show_confinement(frame)  # said once the features run away

    def _reference_stopped(self, ref) -> bool:
        """Whether the comparison run has diverged (its frame ``ref`` not finite, or its
        status not running); the distance plot then says so and stops drawing."""
        reference = self.reference
        if reference.status == RUNNING and frame_is_finite(
                ref, not_applicable(COMPARISON_MODEL)):
            return False
        if reference.status == RUNNING:
            reference.status = DIVERGED
            reference.message = f"diverged at t = {ref.t:.4g}: non-finite diagnostics"
        if self.timeseries.reference_diverged(reference.t):
            self._last_status = 0.0  # say so at once
        return True

    # -- status --------------------------------------------------------------
    @property
    def frames_per_second(self) -> float:
        """Frames per second over the last 30 frames (0 before two frames)."""
        if len(self._ticks) < 2:
            return 0.0
        return (len(self._ticks) - 1) / max(self._ticks[-1] - self._ticks[0], 1e-9)

    def update_status(self, force: bool = False) -> None:
        """Refresh the status line: at once with ``force``, else at most once every
        :data:`STATUS_EVERY` s (a playing run's frames call it)."""
        now = time.perf_counter()
        if not force and now - self._last_status < STATUS_EVERY:
            return
        self._last_status = now
        fps = self.frames_per_second
        sim = self.sim
        running = sim.status == RUNNING and self.playing and self._shown
        end = self.run_end
        parts = [f"**t = {sim.t:.3f}**" + ("" if end is None else f" of {end:g}")]
        if running:  # rates of a run that advances (none while paused: no stale rates)
            # (the server's own cost per tick, tick_ms and compute_ms, is for the
            # benchmarks, not for a projected screen)
            parts += [f"{fps:.1f} frames/s", f"{fps * self.steps_per_frame:.0f} steps/s"]
            cap = self.frame_cap()
            if cap < self.max_fps:  # the server's load lowers the rate (app.serving.pacing)
                parts.append(f"busy server: ≤ {cap:.0f} frames/s")
        # the run's own N and d (a real head's come from its sentence, not the sliders)
        n, d = (self.history[-1].features.shape if self.history
                else (self.settings.n_tokens, self.settings.dim))
        parts.append(f"model **{self.settings.model}**, N = {n}, d = {d}")
        if sim.status == RUNNING:
            parts.append("▶ playing" if running else "■ ended: ↺ Replay runs it again"
                         if self._ended else "❚❚ paused" if not self.playing
                         else "▶ playing (waits while another tab is shown)")
        text = " · ".join(parts)
        if sim.status != RUNNING:
            text += f"\n\n⚠ **{sim.status}**: {sim.message}"
        ref = self.reference
        if ref is not None and ref.status != RUNNING:
            text += (f"\n\n⚠ the reference ({COMPARISON_MODEL} model) **{ref.status}**: "
                     f"{ref.message}; the distance stops there")
        self.status.object = text
        self.tour.show_clock(sim.t, end, sim.status, sim.message, self._ended)
        style = STATUS_STYLE if sim.status == RUNNING else STOPPED_STYLE
        if self.status.styles != style:
            self.status.styles = dict(style)

    # -- the periodic callback ------------------------------------------------------
    @param.depends("playing", watch=True)
    def _toggle_playing(self):
        if not self._ready:
            return
        if not self.playing:
            self.timeseries.flush()
        elif self.steps_to_end() != 0:
            self._ended = False  # played on (no end, or a later one)
        self._ticks.clear()  # the frame rate counts from the next frame
        self._sync_callback()
        self.update_status(force=True)

    def set_shown(self, shown: bool) -> None:
        """The main tab is shown (True) or another tab is: the run advances only while
        the main tab is shown and ``playing``, and goes on when it is shown again."""
        if shown == self._shown:
            return
        self._shown = shown
        self.timeseries.flush()
        self._ticks.clear()
        self._sync_callback()
        self.update_status(force=True)

    def _sync_callback(self) -> None:
        """Run the periodic callback exactly while playing with the main tab shown."""
        cb = self._callback
        if cb is None:
            return
        run = self.playing and self._shown
        if run and not cb.running:
            cb.start()
        elif not run and cb.running:
            cb.stop()
