"""Attention heatmaps: A(t), the softmax A*(t) and log(A/A*) (Theory page: scores and
softmax, tracking the moving softmax).

Bokeh ``image`` glyphs fed by one ``ColumnDataSource`` each; a frame replaces
their ``data``.  Row i (query) runs down, column j (source) across.

A and A* share one colour scale (:attr:`Heatmaps.color_scale`): automatic by default
(the entries' range, in steps: already at N = 8 most entries are well below 1 and the
fixed scale draws a nearly uniform dark block), fixed on [0, 1] (maps comparable across
runs and times) or logarithmic (the decades the entries span).

Point at a token: a click on a row of any map (:meth:`Heatmaps.link_tokens`) outlines
that row of A, A* and log(A/A*) and rings the token's point on the token plot; a click
on a token of the token plot does the same, a second click on it clears. It runs in the
page (a ``CustomJS`` on the plots' tap event), without a round trip to the server.

The images are drawn on the plots' overlay canvas (``level="overlay"``): a new frame
then repaints the image alone, not the axes, title and colour bar around it, which
cost the page far more than the 64 x 64 image (Bokeh reads the page's CSS for every
text it draws).
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import param
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    CustomJS,
    CustomJSHover,
    HoverTool,
    LinearColorMapper,
    LogColorMapper,
)
from bokeh.palettes import RdBu11, Viridis256
from bokeh.plotting import figure

from app.models import spec

_TINY = 1e-300
#: Smallest colour limit of the log-ratio map (a converged run shows a flat map).
_MIN_LIMIT = 1e-3
#: The log-ratio colour limits are the power of 2 above this multiple of the map's
#: largest |entry| ...
_HEADROOM = 1.25
#: ... set when that entry exceeds them or falls below this fraction of them.
_SHRINK = 0.25
#: The colour scales of A and A* (:attr:`Heatmaps.color_scale`).
SCALES = ("fixed 0–1", "automatic", "logarithmic")
#: The automatic scale is the entries' range, moved when they span less than 1/AUTO_FILL
#: of it (0 to a power of 2 above the largest entry made the default N = 8 maps, entries
#: 0.002 … 0.6, a dark block on [0, 1]).
AUTO_FILL = 1.5
#: The automatic scale spans at least 1/MIN_FILL of the largest entry.
MIN_FILL = 4
#: Smallest lower end of the logarithmic scale (entries below it take its colour).
LOG_FLOOR = 1e-12


#: Name of the model whose ``tags`` the page sets to the id of the last frame it painted.
ACK_NAME = "frame_ack"
#: Page script run when the attention map's data changes: acknowledge the frame (echo
#: its id in the ``tags`` of the model named :data:`ACK_NAME`) once the plot has painted
#: it, so the frames the server lets in flight are frames not yet *shown*, not merely
#: not yet received: a page that receives faster than it paints no longer queues frames
#: it never shows, and a changed setting's frame waits behind at most the frames in
#: flight. A plot that is not
#: displayed (another tab, projector mode) or a hidden page (no paints) acknowledges at
#: once. The plot's view is looked up once and again only when it was rebuilt.
ACK_ON_PAINT = """
const f = source.data.frame;
if (!f) return;
const id = f[0];
let view = source._ack_view;
if (view == null || view.is_destroyed) {
  view = source._ack_view = (window.Bokeh && Bokeh.index) ? Bokeh.index.find_one(plot) : null;
  if (view != null) {
    view.repainted.connect(() => {
      const pending = source._ack_pending;
      if (pending != null) { source._ack_pending = null; ack.tags = [pending]; }
    });
  }
}
if (view == null || !view.is_displayed || document.hidden) { ack.tags = [id]; return; }
source._ack_pending = id;
"""


#: Colour of the outline of the token pointed at (its row, its point).
HIGHLIGHT = "#ff2d2d"
#: Name of the source of the outlined row (``y0``, ``y1``: the row's edges).
ROWS_NAME = "token_rows"
#: Page script of a click on a map (``cb_obj.y``: the row) or on the token plot
#: (``cb_obj.x``, ``cb_obj.y``: the nearest token): outline the row of the token clicked,
#: ring its point; the token outlined clicked again clears both.
POINT_AT_TOKEN = """
let i;
if (on_map) {
  i = Math.round(cb_obj.y);
} else {
  const xs = tokens.data.x, ys = tokens.data.y;
  let best = Infinity;
  for (let k = 0; k < xs.length; k++) {
    const d = (xs[k] - cb_obj.x) ** 2 + (ys[k] - cb_obj.y) ** 2;
    if (d < best) { best = d; i = k; }
  }
}
const n = Math.round(y_range.start + 0.5);
if (i == null || !(i >= 0 && i < n)) return;
const now = rows.data.y0;
if (now.length && Math.round(now[0] + 0.5) === i) {
  rows.data = {y0: [], y1: []};
  chosen.indices = [];
} else {
  rows.data = {y0: [i - 0.5], y1: [i + 0.5]};
  chosen.indices = [i];
}
"""


#: Hover text of a row or column index ``value`` (the tooltip's "i" and "j"): the index,
#: and the word its axis labels it with when that is not the index itself.
WORD_AT = """
const i = Math.round(value);
const m = axis.major_label_overrides;
const get = (k) => (m instanceof Map ? m.get(k) : m[k]);
const word = get(i) ?? get(String(i));
return (word != null && String(word) !== String(i)) ? `${i} (${word})` : String(i);
"""


def log_ratio(A: np.ndarray, A_star: np.ndarray) -> np.ndarray:
    """``log(A/A*)`` entrywise, finite even where an entry underflowed to 0."""
    return np.log(np.maximum(A, _TINY)) - np.log(np.maximum(A_star, _TINY))


def _bar_mapper(mapper):
    """A twin of ``mapper`` (linear or log) for the colour bar alone.

    BokehJS signals a change of a colour mapper's "metrics" each time it colours an
    image, and a colour bar listening to that lays its whole plot out again and
    repaints it (axes, title, bar): a twin the image never uses spares every frame that.
    """
    return type(mapper)(palette=mapper.palette, low=mapper.low, high=mapper.high)


def scale_limits(scale: str, low: float, high: float, lo: float, hi: float):
    """The colour limits of A and A* for entries in ``[lo, hi]``, or None to keep
    ``[low, high]`` (limits change in steps: a change repaints the colour bars).

    Parameters
    ----------
    scale : str
        One of :data:`SCALES`.
    low, high : float
        The limits now.
    lo, hi : float
        The smallest and largest entry of the maps.

    Returns
    -------
    (float, float) or None
        Fixed: (0, 1). Automatic: ``[lo, hi]`` rounded outwards to multiples of an
        eighth of the power of 2 at or below ``hi − lo`` (at least ``hi``/:data:`MIN_FILL`;
        within [0, 1]), moved when an entry leaves them or the entries span less than
        1/:data:`AUTO_FILL` of them.
        Logarithmic: the decades around ``[lo, hi]`` (``lo`` at least :data:`LOG_FLOOR`),
        moved when the entries leave them or the lower end is two decades below the
        smallest entry.
    """
    if scale == SCALES[0]:
        new = (0.0, 1.0)
    elif scale == SCALES[1]:
        # at least a quarter of the largest entry: a uniform map (1/N everywhere) had
        # limits 1e-9 apart, its colour bar labelled "0.0312500004"
        span = max(hi - lo, hi / MIN_FILL, 1e-9)
        if 0 <= low <= lo and hi <= high <= 1 and high - low <= AUTO_FILL * span:
            return None
        step = 2.0 ** (math.floor(math.log2(span)) - 3)
        if hi - lo < span:  # (centred on the entries)
            lo, hi = 0.5 * (lo + hi - span), 0.5 * (lo + hi + span)
        new = (max(0.0, math.floor(lo / step) * step), min(1.0, math.ceil(hi / step) * step))
        if new[1] <= new[0]:
            new = (max(0.0, new[0] - step), min(1.0, new[1] + step))
    else:
        lo = max(lo, LOG_FLOOR)
        if low > 0 and low <= lo < 100 * low and hi <= high <= 10 * max(hi, LOG_FLOOR):
            return None
        new = (10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(max(hi, lo))))
        if new[0] == new[1]:
            new = (new[0] / 10, new[1])
    return None if new == (low, high) else new


def _figure(title, mapper, n, label, bar_mapper=None):
    p = figure(
        title=title, width=310, height=300, x_range=(-0.5, n - 0.5), y_range=(n - 0.5, -0.5),
        tools="hover,save,reset,box_zoom", toolbar_location="above",
        x_axis_label="source token j", y_axis_label="query token i",
        tooltips=[("i", "$y{custom}"), ("j", "$x{custom}"), (label, "@image{0.0000}"),
                  ("click", "outline token i (row, point)")],
    )
    # a row's and a column's word where words label the axes ("6 (it)", not "6")
    p.select_one(HoverTool).formatters = {
        "$y": CustomJSHover(args={"axis": p.yaxis[0]}, code=WORD_AT),
        "$x": CustomJSHover(args={"axis": p.xaxis[0]}, code=WORD_AT)}
    source = ColumnDataSource({"image": [np.zeros((n, n), dtype=np.float32)]})
    p.image(image="image", x=-0.5, y=-0.5, dw=n, dh=n, color_mapper=mapper, source=source,
            level="overlay")
    p.add_layout(ColorBar(color_mapper=bar_mapper or _bar_mapper(mapper), width=10), "right")
    p.grid.visible = False
    return p, source


class Heatmaps(pn.viewable.Viewer):
    """Three heatmaps side by side; :meth:`update` pushes one frame."""

    color_scale = param.Selector(
        default=SCALES[1], objects=list(SCALES),
        doc="Colour scale of A and A*: automatic (the data's range, the default), fixed "
            "on [0, 1], or logarithmic.")

    def __init__(self, n_tokens: int = 8, **params):
        super().__init__(**params)
        self.n = n_tokens
        self._extremes = (0.0, 1.0)  # smallest and largest entry of A and A* shown
        # one mapper of each kind for A and A*, and their twins for the colour bars
        self.mappers = {"lin": LinearColorMapper(palette=Viridis256, low=0.0, high=1.0),
                        "log": LogColorMapper(palette=Viridis256, low=1e-3, high=1.0)}
        self.bar_mappers = {k: _bar_mapper(m) for k, m in self.mappers.items()}
        mapper = self.mappers["lin"]
        self.ratio_mapper = LinearColorMapper(palette=list(reversed(RdBu11)), low=-1.0, high=1.0)
        self.fig_attention, self.attention = _figure(
            "Attention A(t)", mapper, n_tokens, "A_ij", self.bar_mappers["lin"])
        self.fig_softmax, self.softmax = _figure(
            "Softmax A*(t) = rowsoftmax(βS)", mapper, n_tokens, "A*_ij",
            self.bar_mappers["lin"])
        self.ratio_bar_mapper = _bar_mapper(self.ratio_mapper)
        self.fig_ratio, self.ratio = _figure(
            "Lag log(A/A*)", self.ratio_mapper, n_tokens, "log(A/A*)", self.ratio_bar_mapper)
        self.figures = (self.fig_attention, self.fig_softmax, self.fig_ratio)
        # The page acknowledges each frame once it has painted it, by echoing its id in
        # the ``tags`` of :attr:`ack` (the dashboard's flow control, see
        # ``Playback.tick``): a model no plot draws (a change of the image's own source
        # would make BokehJS prepare the image again and repaint its plot).
        self.attention.data["frame"] = [0]
        self.ack = ColumnDataSource(data={}, name=ACK_NAME)
        self.attention.js_on_change("data", CustomJS(
            args={"source": self.attention, "ack": self.ack, "plot": self.fig_attention},
            code=ACK_ON_PAINT))
        self.sources = (self.attention, self.softmax, self.ratio)
        # the row of the token pointed at, outlined on every map (:meth:`link_tokens`)
        self.rows = ColumnDataSource({"y0": [], "y1": []}, name=ROWS_NAME)
        for fig in self.figures:
            fig.hstrip(y0="y0", y1="y1", source=self.rows, fill_alpha=0.0,
                       line_color=HIGHLIGHT, line_width=3, level="overlay")
            # the tooltip reads the image (over the outline it showed "A_ij: ???")
            fig.select_one(HoverTool).renderers = [fig.renderers[0]]
        self._chosen = None  # the token plot's filter of the token pointed at

    def link_tokens(self, trajectories) -> None:
        """Point at a token: a click on a row of a map, or on a token of
        ``trajectories`` (:class:`app.mainview.trajectories.Trajectories`), outlines that row on
        the maps and rings the token on the token plot (:data:`POINT_AT_TOKEN`)."""
        self._chosen = trajectories.chosen
        args = {"rows": self.rows, "chosen": trajectories.chosen,
                "tokens": trajectories.tokens, "y_range": self.fig_attention.y_range}
        for fig in self.figures:
            fig.js_on_event("tap", CustomJS(args={**args, "on_map": True},
                                            code=POINT_AT_TOKEN))
        trajectories.fig.js_on_event("tap", CustomJS(args={**args, "on_map": False},
                                                     code=POINT_AT_TOKEN))

    def clear_token(self) -> None:
        """Outline no token (a run with another number of tokens)."""
        if len(self.rows.data["y0"]):
            self.rows.data = {"y0": [], "y1": []}
        if self._chosen is not None and self._chosen.indices:
            self._chosen.indices = []

    def set_model(self, model: str) -> None:
        """No lag map when the model's attention is the softmax (its spec's
        ``identically_zero`` has ``kl``: log(A/A*) ≡ 0, only rounding noise to draw; the
        page says so in one line, :func:`app.mainview.timeseries.zero_text`)."""
        shown = "kl" not in spec(model).identically_zero
        if self.fig_ratio.visible != shown:
            self.fig_ratio.visible = shown

    @param.depends("color_scale", watch=True)
    def _swap_mappers(self) -> None:
        """Colour A and A* with the mapper of the chosen scale, at limits for the maps
        shown."""
        kind = "log" if self.color_scale == SCALES[2] else "lin"
        self._fit_scale(*self._extremes)  # before the mappers are attached
        for fig in (self.fig_attention, self.fig_softmax):
            # a new image renderer: BokehJS's image keeps listening to the mapper it was
            # drawn with when its glyph's mapper is replaced
            old = fig.renderers[0]
            new = fig.image(image="image", x=-0.5, y=-0.5, dw=self.n, dh=self.n,
                            color_mapper=self.mappers[kind], source=old.data_source,
                            level="overlay")
            fig.renderers = [new, *(r for r in fig.renderers if r is not old and r is not new)]
            fig.select_one(HoverTool).renderers = [new]
            bar = next(r for r in fig.right if isinstance(r, ColorBar))
            bar.color_mapper = self.bar_mappers[kind]

    def _fit_scale(self, lo: float, hi: float) -> None:
        kind = "log" if self.color_scale == SCALES[2] else "lin"
        mapper = self.mappers[kind]
        limits = scale_limits(self.color_scale, mapper.low, mapper.high, lo, hi)
        if limits is not None:
            mapper.update(low=limits[0], high=limits[1])
            self.bar_mappers[kind].update(low=limits[0], high=limits[1])

    def resize(self, n: int) -> None:
        """Fit the axes and images to ``n`` tokens (the token pointed at is forgotten)."""
        self.n = n
        self.clear_token()
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
        self._extremes = (float(min(A.min(), A_star.min())), float(max(A.max(), A_star.max())))
        if self.color_scale != SCALES[0]:
            self._fit_scale(*self._extremes)
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
