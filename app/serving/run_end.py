"""A run's end: where a preset's or a tour step's run pauses, and Replay.

:class:`RunEnd` is the part of :class:`app.serving.playback.Playback` that knows the
run's end (``run_end``, a preset's or a tour step's ``t_end``): how many steps are left,
pausing there with the last frame on the plots, playing again after a restart, and a run
that stopped (diverged or failed) saying why in the page's notice.
"""

from __future__ import annotations

import panel as pn
import param

from dynamics import RUNNING


class RunEnd(param.Parameterized):
    """The run's end and what happens there.

    A mixin of :class:`app.serving.playback.Playback`, which provides ``sim``,
    ``playing``, ``timeseries``, ``update_status``, the notice and ``_ready``.
    """

    run_end = param.Number(
        default=None, allow_None=True, bounds=(0.0, None),
        doc="Time the run pauses at (a preset's or a tour step's ``t_end``, with what it is "
            "about still on the plots; Replay runs it again); None: the run streams on.")

    def _init_run_end(self) -> None:
        self._ended = False  # the run paused at its end (run_end)

    def steps_to_end(self) -> int | None:
        """Steps left before :attr:`run_end` (None: no end)."""
        if self.run_end is None:
            return None
        return max(0, round((self.run_end - self.sim.t) / self.sim.settings.dt))

    @property
    def ended(self) -> bool:
        """Whether the run paused at its end (:attr:`run_end`); Replay runs it again."""
        return self._ended

    def _restarted(self) -> None:
        """The run restarted (:meth:`app.dashboard.Dashboard.reset`): a run that had
        paused at its end plays again."""
        if self._ended:
            self._ended = False
            self.playing = True

    def _end_run(self) -> None:
        """The run reached :attr:`run_end`: pause with the last frame on the plots.

        Its changes (the last rows, the clock's "■") go to the page as one message behind
        the frames before it: a change made outside a hold goes out at once, past a frame
        Panel still queues while the page's socket is busy."""
        self._ended = True
        with pn.io.hold():
            self.timeseries.flush()
            self.playing = False
            self.update_status(force=True)

    def _say_stopped(self) -> None:
        """A run that diverged or failed says why in the page's notice (and the tour's
        clock), not only in the status line (hidden in projector mode)."""
        if self.sim.status != RUNNING and self.notice != self.sim.message:
            self.notice = self.sim.message
            self._run_error = True
            self._show_notice()

    @param.depends("run_end", watch=True)
    def _on_run_end(self) -> None:
        if self._ready:
            self.update_status(force=True)
