"""Axis ranges that follow streaming data in steps (:class:`SteppedRange`).

A new batch of rows usually repaints the lines alone, not the axes, ticks and title
around them, when the range does not move: so the range grows with headroom when the
data leave it and shrinks when the data fill a small part of it. A range the user
zooms or pans is left alone until the plot's Reset tool or a new run.
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import Range1d

#: Floor of values drawn on a logarithmic axis.
LOG_FLOOR = 1e-12
#: Headroom added on each side when a range grows, as a fraction of the data's span.
HEADROOM = 0.25
#: A range shrinks to the data when they span less than this fraction of it.
SHRINK = 0.25
#: The time axis starts at the oldest row kept once it leaves this fraction empty.
TRIM = 0.1


#: Decades a log axis spans at most below its largest value: a slope is read over a few
#: decades, and a lag that falls to rounding (or a run that blows up to 1e12) would
#: otherwise crush the curve into a flat line.
MAX_DECADES = 8
#: Decades a log axis spans at least: over fewer than two the page's log ticker falls
#: back to linear ticks, which crowd the top of the axis ("3 4 5 6 7" drawn over each
#: other where a lag stayed between 3 and 7 nats).
MIN_DECADES = 2.1


def log_extent(columns) -> tuple[float, float]:
    """The smallest and largest value of ``columns`` (arrays) to show on a log axis.

    Values at :data:`LOG_FLOOR` (a KL lag of 0 to rounding, drawn at the floor) are left
    out while any value is above it: a run that starts at A = A* has KL ≈ 1e-15 in its
    first frame only, and that one point stretched the axis to 16 decades (10⁻¹² … 10⁴),
    crushing the curve that follows into a flat line (issue #27, item 5). Its line then
    starts below the axis, as log 0 = −∞ does. The axis spans at most
    :data:`MAX_DECADES` below the largest value.
    """
    values = [v[v > LOG_FLOOR] for v in (np.asarray(c, dtype=float) for c in columns)]
    values = [v for v in values if v.size]
    if not values:
        return LOG_FLOOR, LOG_FLOOR
    hi = max(float(v.max()) for v in values)
    return max(min(float(v.min()) for v in values), hi / 10.0 ** MAX_DECADES), hi


class SteppedRange:
    """Server-side fit of a ``Range1d`` to streaming data, changed in steps.

    :meth:`fit` moves the range only when the data leave it (growing it with
    ``HEADROOM``) or span less than ``SHRINK`` of it; on a logarithmic axis the same
    rules hold for the decades.  A range whose ends differ from the last ones set
    here was zoomed or panned by the user and is not touched until :meth:`follow`.
    ``trim`` (the time axis) also moves the start up to the data once they leave
    more than that fraction of the range empty on the left (old rows rolled over).

    ``min_span``: the range spans at least this much from the data's start (the time
    axis of a run just started shows its first time unit, not ±1e-10 around t = 0).
    Constant data get a range around them (half their size, at least ±0.5), not one of
    the width of their rounding error; a log axis spans at least :data:`MIN_DECADES`
    around its data.
    """

    def __init__(self, rng: Range1d, log: bool = False, trim: float | None = None,
                 min_span: float = 0.0):
        self.range, self.log, self.trim, self.min_span = rng, log, trim, min_span
        self.follow()

    def follow(self) -> None:
        """Follow the data again (Reset tool, new run)."""
        self._set = None

    def _user_moved(self) -> bool:
        return self._set is not None and (self.range.start, self.range.end) != self._set

    def fit(self, lo: float, hi: float) -> None:
        """Keep ``[lo, hi]`` (finite, ``lo ≤ hi``) in view, changing the range rarely."""
        if self._user_moved():
            return
        hi = max(hi, lo + self.min_span)
        if self.log:
            lo, hi = math.log10(max(lo, LOG_FLOOR)), math.log10(max(hi, LOG_FLOOR))
        if self.log and hi - lo < MIN_DECADES:  # (constant data too)
            mid = 0.5 * (lo + hi)
            lo, hi = mid - MIN_DECADES / 2, mid + MIN_DECADES / 2
        elif hi - lo <= 1e-9 * max(abs(lo), abs(hi), 1.0):  # constant data
            pad = max(0.5 * abs(lo), 0.5)
            lo, hi = lo - pad, hi + pad
        span = hi - lo
        if self._set is None:
            start, end = lo - 0.05 * span, hi + HEADROOM * span
        else:
            start, end = self._set
            if self.log:
                start, end = math.log10(start), math.log10(end)
            trimmed = self.trim is not None and lo - start > self.trim * (end - start)
            if trimmed:
                start = lo
            elif lo >= start and hi <= end and span >= SHRINK * (end - start):
                return
            start = lo - HEADROOM * span if (lo < start or span < SHRINK * (end - start)) \
                else start
            end = hi + HEADROOM * span if (hi > end or span < SHRINK * (end - start)) else end
        if self.log:
            start, end = 10.0**start, 10.0**end
        self._set = (start, end)
        self.range.update(start=start, end=end)
