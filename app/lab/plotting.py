"""The pieces every plot of the inertial lab is drawn with: its colours and figure
options, logarithmic axes spanning whole decades, and vertical markers with labels.

Logarithmic axes span whole decades around the data (:func:`log_range`), so curves
equal up to rounding (``1 ± 2e-16``) are drawn as the one line they are; the labels of
the vertical markers of one plot sit on rows of their own, aligned away from the
plot's right edge (:func:`place_markers`).
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import FixedTicker, Label, Node, Range1d, Span
from bokeh.plotting import figure

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
#: Options of every figure of the lab.
FIGURE_OPTIONS = dict(height=300, sizing_mode="stretch_width", min_width=300,
                      tools="pan,wheel_zoom,reset,save")


def log_figure(title: str, x_axis_label: str, y_axis_label: str, **options):
    """A figure of the lab with a logarithmic y axis (0.1 … 10 until data come)."""
    return figure(title=title, x_axis_label=x_axis_label, y_axis_label=y_axis_label,
                  y_axis_type="log", y_range=Range1d(0.1, 10.0), **options,
                  **FIGURE_OPTIONS)


def log_range(values, extra=()) -> tuple[float, float]:
    """Ends of a logarithmic axis showing ``values``: the whole decades around them.

    Parameters
    ----------
    values : iterable of array_like
        The curves' y values (non-positive and non-finite ones are left out).
    extra : iterable of float
        More values to show (a threshold line).

    Returns
    -------
    (float, float)
        ``(10**a, 10**b)``, integers ``a < b``: at least one decade (two around data
        near a power of ten), so that curves equal up to rounding look like one line and
        the axis has tick labels; (0.1, 10) without data.
    """
    arrays = [np.asarray(v, dtype=float).ravel() for v in values]
    arrays.append(np.asarray(list(extra), dtype=float))
    data = np.concatenate(arrays) if arrays else np.empty(0)
    data = data[np.isfinite(data) & (data > 0)]
    if data.size == 0:
        return 0.1, 10.0
    # a twentieth of a decade of room: a curve on a power of ten is not on the frame
    lo = math.floor(math.log10(data.min()) - 0.05)
    hi = math.ceil(math.log10(data.max()) + 0.05)
    return 10.0**lo, 10.0**hi


def decade_ticker(start: float, end: float) -> FixedTicker:
    """Ticks at the powers of ten from ``start`` to ``end`` (minor ticks at 2…9 × them).

    BokehJS's log ticker falls back to linear ticks over a range of one or two decades,
    crowding their labels at its top and labelling nothing below 1.
    """
    lo, hi = round(math.log10(start)), round(math.log10(end))
    step = max(1, math.ceil((hi - lo) / 8))  # at most about 8 labels
    major = [10.0**k for k in range(lo, hi + 1, step)]
    minor = [m * 10.0**k for k in range(lo, hi) for m in range(2, 10)] if step == 1 else []
    return FixedTicker(ticks=major, minor_ticks=minor)


def fit_log_axis(fig, curves, extra=()) -> None:
    """Set the logarithmic y axis of ``fig`` to the whole decades around ``curves``
    (``Curve`` objects) and ``extra`` values (:func:`log_range`), ticked at them."""
    start, end = log_range([c.y for c in curves], extra)
    fig.y_range.update(start=start, end=end)
    fig.yaxis.ticker = decade_ticker(start, end)


def vspan(fig, text, row=0, color="black"):
    """A dashed vertical marker with its label (in its colour) on label row ``row``,
    counted from the top of the frame: there the lab's curves, which start low and rise
    only at a blow-up, leave room (at the bottom the labels hid the layers' points
    before the crossing, the evidence of the effective-depth step)."""
    span = Span(location=0, dimension="height", line_dash="dashed", line_width=2,
                line_color=color, visible=False)
    top = Node(target="frame", symbol="top", offset=4 + 20 * row)
    label = Label(x=0, y=top, text=text, visible=False, text_baseline="top",
                  text_font_size="10pt", text_color=color, background_fill_color="white",
                  background_fill_alpha=0.8)
    fig.add_layout(span)
    fig.add_layout(label)
    return span, label


def place_markers(placements, x_end) -> None:
    """Place the vertical markers of one plot and their labels.

    Parameters
    ----------
    placements : iterable of ``(marker, location, text)``
        A marker of :func:`vspan` (hidden when ``location`` is None or not finite),
        its x and its label's text.
    x_end : float
        The largest x of the plot's data: a label right of half of it is drawn to the
        left of its marker, so that it is not cut off by the plot's right edge.
    """
    for (span, label), location, text in placements:
        ok = location is not None and bool(np.isfinite(location))
        span.visible = label.visible = ok
        if not ok:
            continue
        span.location = label.x = float(location)
        label.text = text
        right = np.isfinite(x_end) and location > 0.5 * x_end
        label.update(text_align="right" if right else "left", x_offset=-4 if right else 4)


def x_end(curves) -> float:
    """The largest x of ``curves`` (``Curve`` objects; 0 without points)."""
    return max((float(np.max(c.x)) for c in curves if len(c.x)), default=0.0)
