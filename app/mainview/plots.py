"""Bokeh figures of quantities against model time, as the time series and the inertial lab
draw them: :func:`time_figure` (a plot of fixed size on set ranges) and
:func:`legend_below` (its legend under the plot, where it covers no curve).
"""

from __future__ import annotations

from bokeh.models import Range1d
from bokeh.plotting import figure

#: The time axis's label.
TIME_LABEL = "t (model time units)"


def time_figure(title, y_label, height=250, **kw):
    """A plot of ``y_label`` against model time, 430 px wide, with set ranges (their
    bounds are fitted to the data by :class:`app.mainview.ranges.SteppedRange`); ``kw``
    goes to :func:`bokeh.plotting.figure` (``y_axis_type="log"``: a log axis)."""
    p = figure(title=title, height=height, width=430, x_axis_label=TIME_LABEL,
               y_axis_label=y_label, tools="pan,wheel_zoom,box_zoom,reset,save,hover",
               tooltips=[("t", "@t{0.000}"), ("value", "$y{0.0000e}")],
               toolbar_location="above", x_range=Range1d(0.0, 1.0),
               y_range=Range1d(1e-3, 1.0) if kw.get("y_axis_type") == "log" else Range1d(0, 1),
               **kw)
    p.min_border_right = 12
    return p


def legend_below(fig, ncols: int, label_width: int = 20) -> None:
    """Move ``fig``'s legend below the plot, where it covers no curve.

    It stays on the overlay canvas with the lines: BokehJS draws a legend's glyph only
    for a line with data, so a legend painted once, before the first rows, would keep
    its labels without their line styles.
    """
    legend = fig.legend[0]
    legend.update(click_policy="hide", label_text_font_size="9pt", padding=2, spacing=2,
                  margin=2, ncols=ncols, border_line_alpha=0, glyph_width=18,
                  label_width=label_width,
                  label_standoff=4, level="overlay", location="top_left")
    fig.add_layout(legend, "below")
