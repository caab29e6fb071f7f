"""Attention heatmaps: A(t), the softmax A*(t) and log(A/A*) (Theory page: scores and
softmax, tracking the moving softmax).

Bokeh ``image`` glyphs fed by one ``ColumnDataSource`` each; a frame replaces
their ``data``.  Row i (query) runs down, column j (source) across.

The images are drawn on the plots' overlay canvas (``level="overlay"``): a new frame
then repaints the image alone, not the axes, title and colour bar around it, which
cost the page far more than the 64 x 64 image (Bokeh reads the page's CSS for every
text it draws).
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
from bokeh.models import ColorBar, ColumnDataSource, CustomJS, LinearColorMapper
from bokeh.palettes import RdBu11, Viridis256
from bokeh.plotting import figure

_TINY = 1e-300
#: Smallest colour limit of the log-ratio map (a converged run shows a flat map).
_MIN_LIMIT = 1e-3
#: The log-ratio colour limits are the power of 2 above this multiple of the map's
#: largest |entry| ...
_HEADROOM = 1.25
#: ... set when that entry exceeds them or falls below this fraction of them.
_SHRINK = 0.25


def log_ratio(A: np.ndarray, A_star: np.ndarray) -> np.ndarray:
    """``log(A/A*)`` entrywise, finite even where an entry underflowed to 0."""
    return np.log(np.maximum(A, _TINY)) - np.log(np.maximum(A_star, _TINY))


def _bar_mapper(mapper: LinearColorMapper) -> LinearColorMapper:
    """A twin of ``mapper`` for the colour bar alone.

    BokehJS signals a change of a colour mapper's "metrics" each time it colours an
    image, and a colour bar listening to that lays its whole plot out again and
    repaints it (axes, title, bar): a twin the image never uses spares every frame that.
    """
    return LinearColorMapper(palette=mapper.palette, low=mapper.low, high=mapper.high)


def _figure(title, mapper, n, label, bar_mapper=None):
    p = figure(
        title=title, width=310, height=300, x_range=(-0.5, n - 0.5), y_range=(n - 0.5, -0.5),
        tools="hover,save,reset,box_zoom", toolbar_location="above",
        x_axis_label="source token j", y_axis_label="query token i",
        tooltips=[("i", "$y{0}"), ("j", "$x{0}"), (label, "@image{0.0000}")],
    )
    source = ColumnDataSource({"image": [np.zeros((n, n), dtype=np.float32)]})
    p.image(image="image", x=-0.5, y=-0.5, dw=n, dh=n, color_mapper=mapper, source=source,
            level="overlay")
    p.add_layout(ColorBar(color_mapper=bar_mapper or _bar_mapper(mapper), width=10), "right")
    p.grid.visible = False
    return p, source


class Heatmaps(pn.viewable.Viewer):
    """Three heatmaps side by side; :meth:`update` pushes one frame."""

    def __init__(self, n_tokens: int = 8, **params):
        super().__init__(**params)
        self.n = n_tokens
        mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
        self.ratio_mapper = LinearColorMapper(palette=list(reversed(RdBu11)), low=-1.0, high=1.0)
        self.fig_attention, self.attention = _figure(
            "Attention A(t)", mapper, n_tokens, "A_ij")
        self.fig_softmax, self.softmax = _figure(
            "Softmax A*(t) = rowsoftmax(βS)", mapper, n_tokens, "A*_ij")
        self.ratio_bar_mapper = _bar_mapper(self.ratio_mapper)
        self.fig_ratio, self.ratio = _figure(
            "Lag log(A/A*)", self.ratio_mapper, n_tokens, "log(A/A*)", self.ratio_bar_mapper)
        self.figures = (self.fig_attention, self.fig_softmax, self.fig_ratio)
        # The page acknowledges each frame it receives by echoing its id in ``tags``
        # (the dashboard's flow control, see ``Dashboard.tick``).
        self.attention.data["frame"] = [0]
        self.attention.js_on_change("data", CustomJS(
            args={"source": self.attention},
            code="const f = source.data.frame; if (f) source.tags = [f[0]];"))
        self.sources = (self.attention, self.softmax, self.ratio)

    def resize(self, n: int) -> None:
        """Fit the axes and images to ``n`` tokens."""
        self.n = n
        for fig in self.figures:
            fig.x_range.start, fig.x_range.end = -0.5, n - 0.5
            fig.y_range.start, fig.y_range.end = n - 0.5, -0.5
            fig.renderers[0].glyph.update(dw=n, dh=n)

    def update(self, frame, frame_id: int = 0, beta: float | None = None) -> None:
        """Show the attention of ``frame`` (``frame_id`` is echoed back by the page).

        ``beta``, the β the frame was computed with, is sent along with the softmax map
        (the page, and the browser benchmark's slider latency, can tell which β a map
        shows).
        """
        A, A_star = frame.attention, frame.softmax
        if A.shape[0] != self.n:
            self.resize(A.shape[0])
        ratio = log_ratio(A, A_star)
        limit = max(float(np.abs(ratio).max()), _MIN_LIMIT)
        self.attention.data = {"image": [A.astype(np.float32)], "frame": [frame_id]}
        softmax = {"image": [A_star.astype(np.float32)]}
        if beta is not None:
            softmax["beta"] = [float(beta)]
        self.softmax.data = softmax
        self.ratio.data = {"image": [ratio.astype(np.float32)]}
        # Symmetric limits covering the map, with headroom: changing them repaints the
        # colour bar and its plot, so they move only when the map outgrows them or
        # shrinks well inside them.
        if not (_SHRINK * self.ratio_mapper.high <= limit <= self.ratio_mapper.high):
            high = 2.0 ** math.ceil(math.log2(_HEADROOM * limit))
            self.ratio_mapper.update(low=-high, high=high)
            self.ratio_bar_mapper.update(low=-high, high=high)

    def __panel__(self):
        return pn.Row(*(pn.pane.Bokeh(f) for f in self.figures))
