"""Adaptive frame rate: many sessions on one server share its event loop fairly.

A ``panel serve`` process runs every session's periodic callback on one event loop (one
core). Each frame costs the loop the session's tick (simulation, building the frame,
Bokeh's serialisation) and more work after it (writing the message to the socket,
handling the page's acknowledgement). When the sessions ask for more than the loop can
do, every callback runs late, slider changes wait behind the queue and some sessions
starve. Instead, each session lowers its own frame rate as the load grows:

``cap = clamp(min(max_fps · scale, fair_fps), MIN_FPS, max_fps)`` where

* ``fair_fps = BUSY_TARGET / (sessions · tick_seconds)``: a session's equal share of
  :data:`BUSY_TARGET` of the loop's time, at its own measured tick cost (a session at
  N = 256 gets fewer frames than one at N = 8, for the same time);
* ``scale`` in ``[0, 1]``: one per process, driven by the *event-loop lag* (how late a
  timer of the loop fires), which sees every cost, including those outside the ticks:
  it shrinks by :data:`DECREASE` each probe while the lag (median of the last
  :data:`LAG_WINDOW` probes: one garbage collection or one moment without a core on a
  shared machine does not throttle anyone) is above :data:`LAG_HIGH`
  and grows by :data:`INCREASE` while it is below :data:`LAG_LOW` (additive increase,
  multiplicative decrease: the sessions settle just below what the loop can do, and
  recover within seconds when the load goes away);
* :data:`MIN_FPS`: no session is starved below it (each still moves visibly).

A session's periodic callback is called every half frame interval of its cap
(:func:`callback_period`, 10–100 ms), not every 10 ms: on a loaded server most calls
would otherwise find nothing to send, and a class's worth of them takes a core.

:class:`FrameGovernor` is the pure control law (no clock, no loop: tested on its own);
:class:`LoopMonitor` probes the running loop's lag and feeds one governor per process
(:func:`governor`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: Fewest frames per second a session is capped to (no session is starved below it).
MIN_FPS = 5.0
#: Share of the event loop's time the sessions' ticks may take together (the rest:
#: socket writes, acknowledgements, widget events, so that a slider change is seen at once).
BUSY_TARGET = 0.6
#: Event-loop lag (s) above which ``scale`` shrinks, and below which it grows.
LAG_HIGH, LAG_LOW = 0.040, 0.015
#: Multiplicative decrease per probe above ``LAG_HIGH``; additive increase below ``LAG_LOW``.
DECREASE, INCREASE = 0.85, 0.03
#: Seconds between two lag probes.
PROBE_EVERY = 0.1
#: The lag acted on is the median of this many probes.
LAG_WINDOW = 5
#: Longest period (ms) of a session's periodic callback (at the 5 frames/s floor: two
#: calls per frame).
LONGEST_PERIOD = 100
#: Relative change of the ideal period below which the callback keeps its period (each
#: change restarts it).
PERIOD_TOLERANCE = 0.25


def callback_period(cap: float, shortest: int = 10, current: int | None = None) -> int:
    """Milliseconds between calls of a session's periodic callback sending ``cap``
    frames/s: half the frame interval (a frame then waits at most half an interval for
    its call, and an interval is two calls, so no frame slips to a third), in whole 5 ms,
    between ``shortest`` and :data:`LONGEST_PERIOD`; ``current`` is kept while the
    ideal period is within :data:`PERIOD_TOLERANCE` of it and at most half the interval.

    A callback called every 10 ms while its session may send 5 frames/s returns at once
    19 times in 20, and on a server shared by a class those calls alone take a core.

    Parameters
    ----------
    cap : float
        Frames per second the session may send (> 0).
    shortest : int
        The session's own period (ms; ``Playback.period``).
    current : int, optional
        The callback's period now (ms).

    Returns
    -------
    int
    """
    if not cap > 0:
        raise ValueError(f"frame cap must be > 0 frames/s, got {cap!r}")
    half = 500.0 / cap
    ideal = min(max(5 * int(half // 5), shortest), max(LONGEST_PERIOD, shortest))
    if (current is not None and abs(ideal - current) <= PERIOD_TOLERANCE * current
            and (current <= half or current == shortest)):
        return current
    return ideal


@dataclass
class FrameGovernor:
    """The control law of the per-session frame cap (see the module docstring).

    Attributes
    ----------
    scale : float
        In ``[0, 1]``: the fraction of its ``max_fps`` every session may use, set by the
        event-loop lag (:meth:`observe_lag`).
    sessions : int
        Sessions whose run plays in this process (at least 1 when a cap is asked).
    lag : float
        The event-loop lag acted on (s): the median of the last :data:`LAG_WINDOW`.
    """

    scale: float = 1.0
    sessions: int = 1
    lag: float = 0.0
    _lags: deque = field(default_factory=lambda: deque(maxlen=LAG_WINDOW), repr=False)

    def observe_lag(self, lag: float, sessions: int | None = None) -> float:
        """Update ``scale`` from one lag measurement (s); return the new scale.

        Parameters
        ----------
        lag : float
            How late a timer of the event loop fired (s, ≥ 0).
        sessions : int, optional
            Number of playing sessions now (kept for :meth:`cap`).
        """
        if not lag >= 0.0:  # also NaN
            raise ValueError(f"event-loop lag must be a number ≥ 0 s, got {lag!r}")
        if sessions is not None:
            self.sessions = max(int(sessions), 1)
        self._lags.append(lag)
        self.lag = lag = statistics.median(self._lags)
        if lag > LAG_HIGH:
            self.scale *= DECREASE
        elif lag < LAG_LOW:
            self.scale = min(1.0, self.scale + INCREASE)
        return self.scale

    def forget(self) -> None:
        """Forget the load measured so far (nobody plays): full frame rate again."""
        self.scale = 1.0
        self._lags.clear()

    def cap(self, max_fps: float, tick_seconds: float) -> float:
        """Frames per second a session asking ``max_fps`` may send now.

        Parameters
        ----------
        max_fps : float
            The session's own cap (``Playback.max_fps``).
        tick_seconds : float
            The session's measured cost of one tick (s; 0 before its first frame).

        Returns
        -------
        float
            In ``[min(MIN_FPS, max_fps), max_fps]``.
        """
        if not max_fps > 0:
            raise ValueError(f"max_fps must be > 0, got {max_fps!r}")
        fps = max_fps * self.scale
        if tick_seconds > 0:
            fps = min(fps, BUSY_TARGET / (self.sessions * tick_seconds))
        return min(max(fps, MIN_FPS), max_fps)

    @property
    def adapting(self) -> bool:
        """Whether the load lowers the frame rates now (``scale`` below 1)."""
        return self.scale < 1.0


@dataclass
class LoopMonitor:
    """Probes the running event loop's lag every :data:`PROBE_EVERY` s into a governor.

    ``count_sessions`` is called at each probe (the number of playing sessions); the
    probe stops by itself when it returns 0, and :meth:`ensure_running` starts it again.
    """

    governor: FrameGovernor
    count_sessions: Callable[[], int]
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _expected: float = 0.0

    @property
    def running(self) -> bool:
        """Whether it probes now (it stops by itself once nobody plays)."""
        return self._loop is not None

    def ensure_running(self) -> None:
        """Start probing on the running loop (nothing without one, or if it probes)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._loop is loop:
            return
        self._loop = loop
        self._schedule()

    def _schedule(self) -> None:
        self._expected = time.perf_counter() + PROBE_EVERY
        self._loop.call_later(PROBE_EVERY, self._probe)

    def _probe(self) -> None:
        lag = max(time.perf_counter() - self._expected, 0.0)
        sessions = self.count_sessions()
        self.governor.observe_lag(lag, sessions)
        if sessions == 0:  # nobody plays: stop probing (and forget the load)
            self.governor.forget()
            self._loop = None
            return
        self._schedule()


_GOVERNOR = FrameGovernor()
_MONITOR: LoopMonitor | None = None


def governor(count_sessions: Callable[[], int] | None = None) -> FrameGovernor:
    """This process's governor; with ``count_sessions``, also make sure its lag probe
    runs on the running event loop (a server session calls it when its page loads)."""
    global _MONITOR
    if count_sessions is not None:
        if _MONITOR is None:
            _MONITOR = LoopMonitor(_GOVERNOR, count_sessions)
        _MONITOR.ensure_running()
    return _GOVERNOR
