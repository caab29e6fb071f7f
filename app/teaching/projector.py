"""Projector mode: one switch for a lecture hall (large type, the comparison the lecture
is about, strong lines, everything within 1280×720 without scrolling, the tour's banner
included).

On: the sidebar, the equations, the caption, the notices, the page title and the
developer's status line (frame rate, server time) are hidden (a tour step's text stays);
the main tab keeps five plots in two rows: the attention ``A(t)`` beside its softmax
``A*(t)`` (the comparison "attention relaxes to softmax") and the tokens, then the lag
on its log axis and the energy balance, each of :data:`SIZES` (on a tour step: the time
series its text names, :meth:`Projector.shown_figures`); on a real sentence (words on
the heatmaps' axes) A and A* alone, large enough that each word's row and column is read
at :data:`FONT` (with the time series a tour step names beside them); on the sphere the
clustering view's four plots, the unit circle in a square frame. Every axis label and
tick label is :data:`FONT` or larger; lines are drawn :data:`LINE_SCALE` times thicker,
in black text; the plots' toolbars are hidden (a toolbar above a plot covered its large
title). "☰ Controls" opens the controls as a drawer over the plots (scrolling on its
own), not beside them: the plots keep their rows. In a larger window (a 1920×1080
projector) every size and text is scaled by :meth:`Projector.scale` (the window's size,
reported by the page), so the plots use the screen. Off: everything as before (each
change is recorded and undone).
"""

from __future__ import annotations

import param
from bokeh.models import ColorBar, CustomJSTicker, Label, LabelSet
from panel.custom import JSComponent

from app.mainview.real_heads import number_ticks
from app.serving.server import locked

#: Text sizes in projector mode (axis labels ≥ 18 px).
FONT, TITLE_FONT, LEGEND_FONT = "18px", "20px", "15px"
#: Width and height (px) of the plots kept, by role: the heatmaps and the tokens in the
#: first row, the time series in the second; with the tour's banner the two rows end
#: above 720 px in a 1280×720 window.
SIZES = {"heatmap": (300, 230), "tokens": (620, 230), "series": (612, 236),
         "sphere": (612, 222), "word_heatmap": (540, 460),
         # a sentence with the time series its tour step names, in one row: A with the
         # words of the rows, A* beside it with its colour bar (one colour scale for
         # both; its rows are A's), each word's row and column 20 px at N = 16
         "word_attention": (430, 460), "word_softmax": (400, 460), "word_series": (366, 460)}
#: The side (px at scale 1) of the square frame of the tokens on the sphere: the unit
#: circle stays round (the row's height, less its title and axis).
SPHERE_FRAME = 150
#: Ticks a time series' axes ask for at most: at :data:`FONT` the default's five or more
#: overlapped on a plot 100 px high.
SERIES_TICKS = 4
#: Numbered ticks a heatmap's axis shows at most (a seeded run's tokens): at :data:`FONT`
#: on a 300 px heatmap every second of 16 ran together ("101214").
HEATMAP_TICKS = 5
#: Kept for callers of the four-plot layout (the width and height of a time series).
PLOT_SIZE = SIZES["series"]
#: Shorter titles where the page's own do not fit a projector's plot at TITLE_FONT.
SHORT_TITLES = {"softmax": "Softmax A*(t)", "tokens": "Tokens (principal axes of X(0))",
                "kl": "Lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)", "sphere": "On the sphere"}
#: Lines are this many times thicker.
LINE_SCALE = 1.75
#: The largest factor the sizes are scaled by in a window larger than 1280×720 (never
#: below 1: a smaller window lets the rows wrap).
MAX_SCALE = 2.0
#: What the scaled plots need (px at scale 1): the first row's width with the panes'
#: margins, the two rows' height with theirs; what is not scaled: the page's width
#: beside the rows (margins, a scroll bar) and its height above them (buttons, the
#: tour's banner, the tabs).
ROW_WIDTH = 2 * SIZES["heatmap"][0] + SIZES["tokens"][0] + 3 * 12
ROWS_HEIGHT = SIZES["tokens"][1] + SIZES["series"][1] + 2 * 8
#: The same for the words' layout (A and A* alone, in one row: :meth:`Projector.layout`).
WORD_ROW_WIDTH = 2 * SIZES["word_heatmap"][0] + 2 * 12
WORD_ROWS_HEIGHT = SIZES["word_heatmap"][1] + 8
WORD_SERIES_ROW_WIDTH = sum(SIZES[k][0] for k in ("word_attention", "word_softmax",
                                                  "word_series")) + 3 * 12
SLACK_WIDTH, SLACK_HEIGHT = 48, 250
#: The controls in projector mode: a drawer at the window's right edge, over the plots
#: (the button opening and closing it stays free at the left), scrolling on its own.
DRAWER_STYLES = {"position": "fixed", "z-index": "20", "top": "44px", "right": "0px",
                 "background": "white", "box-shadow": "-2px 2px 10px rgba(0, 0, 0, 0.35)",
                 "max-height": "calc(100vh - 50px)", "overflow-y": "auto",
                 "padding": "4px"}


def _px(size: str, scale: float) -> str:
    return f"{round(int(size.removesuffix('px')) * scale)}px"


def _text_props(fig, scale: float = 1.0, title_font: str = TITLE_FONT) -> dict:
    font, title, legend_font = (_px(f, scale) for f in (FONT, title_font, LEGEND_FONT))
    props = {}
    for axis in (*fig.xaxis, *fig.yaxis):
        props[axis] = {"axis_label_text_font_size": font,
                       "major_label_text_font_size": font,
                       "axis_label_text_color": "black", "major_label_text_color": "black"}
    props[fig.title] = {"text_font_size": title, "text_color": "black"}
    for bar in fig.select(ColorBar):  # (its ticks were left at 9 px)
        props[bar] = {"major_label_text_font_size": legend_font}
    if fig.legend:  # legends in rows (below the plots): three columns, two rows at most
        legend = fig.legend[0]
        props[legend] = {"label_text_font_size": legend_font}
        if isinstance(legend.ncols, int):
            props[legend]["ncols"] = max(3, legend.ncols)
    for renderer in fig.renderers:
        glyph = renderer.glyph
        if hasattr(glyph, "line_width") and isinstance(glyph.line_width, (int, float)):
            props[glyph] = {"line_width": glyph.line_width * LINE_SCALE * scale}
    return props


def decade_ticker(most: int = SERIES_TICKS) -> CustomJSTicker:
    """Ticks at powers of ten, at most ``most`` of them (every k-th decade from the top):
    Bokeh's log ticker labels up to ten decades whatever it is asked, and at
    :data:`FONT` on a plot 236 px high their labels were drawn over each other."""
    return CustomJSTicker(major_code=f"""
      const lo = Math.log10(Math.min(cb_data.start, cb_data.end));
      const hi = Math.log10(Math.max(cb_data.start, cb_data.end));
      const a = Math.ceil(lo - 1e-9), b = Math.floor(hi + 1e-9);
      if (!isFinite(a) || !isFinite(b) || b < a) return [];
      const step = Math.max(1, Math.ceil((b - a + 1) / {most}));
      const ticks = [];
      for (let k = b; k >= a; k -= step) ticks.push(10 ** k);
      return ticks.reverse();""", minor_code="return [];")


class WindowSize(JSComponent):
    """The browser window's inner size (px), reported when shown and after a resize."""

    inner_width = param.Integer(default=0, bounds=(0, None))
    inner_height = param.Integer(default=0, bounds=(0, None))

    _esm = """
    export function render({ model }) {
      let timer = null;
      const report = () => {
        model.inner_width = window.innerWidth;
        model.inner_height = window.innerHeight;
      };
      const onResize = () => { clearTimeout(timer); timer = setTimeout(report, 300); };
      report();
      window.addEventListener("resize", onResize);
      model.on("remove", () => window.removeEventListener("resize", onResize));
      return document.createElement("span");
    }
    """


def _update(obj, values: dict) -> None:
    """Set ``values`` on a Panel object or a Bokeh model."""
    if isinstance(obj, param.Parameterized):
        obj.param.update(**values)
    else:
        obj.update(**values)


class Projector:
    """Turns projector mode on and off for ``dashboard`` (its layout built)."""

    def __init__(self, dashboard):
        self.dashboard = dashboard
        self._saved: list[tuple[object, dict]] = []  # (model, its old values)
        self._reopen = False  # the drawer of controls was open when undone for a new run
        self.window = WindowSize(width=0, height=0, margin=0)  # (placed on the page)
        self.window.param.watch(locked(self._on_resize), ["inner_width", "inner_height"])
        self._scale = 1.0  # the scale projector mode was done at
        self._kept = ()  # the plots it keeps

    @property
    def scale(self) -> float:
        """The factor of every size and text: the largest at which the first row fits
        the window's width and the two rows its height (:data:`ROW_WIDTH`,
        :data:`ROWS_HEIGHT`; :data:`WORD_ROW_WIDTH`, :data:`WORD_ROWS_HEIGHT` for the
        words' layout), in [1, :data:`MAX_SCALE`], rounded down to 0.05 (1 while
        the page has not said its size)."""
        w, h = self.window.inner_width, self.window.inner_height
        if not w or not h:
            return 1.0
        row_width, rows_height = ROW_WIDTH, ROWS_HEIGHT
        if self.layout() == "words":
            row_width = WORD_SERIES_ROW_WIDTH if self._word_series() else WORD_ROW_WIDTH
            rows_height = WORD_ROWS_HEIGHT
        ratio = min((w - SLACK_WIDTH) / row_width, (h - SLACK_HEIGHT) / rows_height)
        return min(max(1.0, 0.05 * int(ratio / 0.05 + 1e-9)), MAX_SCALE)

    def _on_resize(self, *events) -> None:
        if self._saved and self.dashboard.projector and self.scale != self._scale:
            self.apply(False)
            self.apply(True)

    def _set(self, obj, **values) -> None:
        old = {k: getattr(obj, k) for k in values}
        if "styles" in values:
            # the page only sets the styles it is sent, it never removes one: a style
            # added here is given back as "" (removed), or the controls' drawer stayed
            # fixed over the plots after projector mode was switched off
            old["styles"] = {**{k: "" for k in values["styles"]}, **old["styles"]}
        self._saved.append((obj, old))
        _update(obj, values)

    def layout(self) -> str:
        """Which plots projector mode keeps: ``"sphere"`` (the clustering view),
        ``"words"`` (a real sentence: its words label the heatmaps' rows and columns,
        which a class must read) or ``"default"``."""
        d = self.dashboard
        if d.clustering.mode == "on_sphere":
            return "sphere"
        return "words" if d.real_heads.has_words else "default"

    def _named_series(self) -> list:
        """The time series the tour step shown names (the lag on its log axis)."""
        d = self.dashboard
        return [f for f in d.tour.named_figures(log_kl=True) if f in d.timeseries.figures]

    def _word_series(self):
        """The time series kept beside a sentence's A and A* (the first the tour step
        names), or ``None``."""
        series = self._named_series()
        return series[0] if series else None

    def shown_figures(self):
        """The plots of the main tab kept in projector mode: the clustering view's four
        on the sphere; A(t) beside A*(t), large, where words label them (each word's row
        and column readable at :data:`FONT`), with the time series a tour step names
        beside them; otherwise A(t) beside A*(t), the tokens, then two time series: those
        a tour step names (its text speaks of them), else the lag and the energy balance.
        """
        d = self.dashboard
        layout = self.layout()
        if layout == "sphere":
            return d.clustering.figures[:4]
        if layout == "words":
            series = self._word_series()
            return (d.heatmaps.fig_attention, d.heatmaps.fig_softmax,
                    *((series,) if series is not None else ()))
        ts = d.timeseries
        series = [f for f in dict.fromkeys([*self._named_series(), ts.fig_kl_log,
                                            ts.fig_energy]) if f not in ts.empty]
        return (d.heatmaps.fig_attention, d.heatmaps.fig_softmax, d.trajectories.fig,
                *series[:2])

    def follow(self) -> None:
        """Projector mode done again if the plots it keeps changed (a tour step that
        names other plots at the same settings: no new run did it)."""
        if self._saved and self.dashboard.projector and self._kept != tuple(
                self.shown_figures()):
            self.apply(False)
            self.apply(True)

    def _size(self, fig) -> tuple[int, int]:
        d = self.dashboard
        if fig is d.clustering.fig_tokens:  # its frame square (:data:`SPHERE_FRAME`)
            return SPHERE_FRAME + 110, SIZES["sphere"][1]
        if d.clustering.mode == "on_sphere":
            return SIZES["sphere"]
        if self.layout() == "words" and self._word_series() is not None:
            return SIZES[{d.heatmaps.fig_attention: "word_attention",
                          d.heatmaps.fig_softmax: "word_softmax"}.get(fig, "word_series")]
        if fig in (d.heatmaps.fig_attention, d.heatmaps.fig_softmax):
            return SIZES["word_heatmap" if self.layout() == "words" else "heatmap"]
        if fig is d.trajectories.fig:
            return SIZES["tokens"]
        return SIZES["series"]

    def _short_titles(self) -> dict:
        d = self.dashboard
        return {d.heatmaps.fig_softmax: SHORT_TITLES["softmax"],
                d.clustering.fig_tokens: SHORT_TITLES["sphere"],
                d.trajectories.fig: SHORT_TITLES["tokens"],
                d.timeseries.fig_kl_log: SHORT_TITLES["kl"]}

    def apply(self, on: bool) -> None:
        """Projector mode on or off."""
        d = self.dashboard
        if not on:
            # undone only to be done again (a new run's plots, projector mode staying on):
            # an open drawer of controls stays open
            self._reopen = bool(self._saved) and d.projector and d.sidebar_toggle.value
            for obj, values in reversed(self._saved):
                _update(obj, values)
            self._saved = []
            return
        if self._saved:
            return
        kept = self._kept = tuple(self.shown_figures())
        titles = self._short_titles()
        series = [f for f in kept if f not in (d.heatmaps.fig_attention, d.heatmaps.fig_softmax,
                                               d.clustering.fig_similarity)]
        for fig in d.plot_panes:
            if fig not in kept and fig.visible:
                self._set(fig, visible=False)
            # every plot's toolbar off, the hidden ones' too: a plot hidden by the next
            # run's layout got its toolbar back while hidden, and BokehJS failed on it
            # ("cannot find a view for ToolbarPanel"), dropping the rest of that update
            # (the page kept the previous step's plots)
            if fig.toolbar_location is not None:
                self._set(fig, toolbar_location=None)
        scale = self._scale = self.scale
        for fig in kept:
            width, height = (round(v * scale) for v in self._size(fig))
            self._set(fig, width=width, height=height, min_width=width, max_width=width)
            pane = d.plot_panes[fig]
            self._set(pane, min_width=width, max_width=width, styles={"flex": f"0 0 {width}px"})
            for obj, values in _text_props(fig, scale).items():
                self._set(obj, **values)
            if fig in titles and fig.title.text != titles[fig]:
                self._set(fig.title, text=titles[fig])
            if fig in series:  # in-plot labels (guides, change markers) at the axes' size
                for label in (*fig.select(Label), *fig.select(LabelSet)):
                    self._set(label, text_font_size=_px(FONT, scale))
            if fig is d.timeseries.fig_kl_log:  # its decades apart
                self._set(fig.yaxis[0], ticker=decade_ticker())
            if fig in series:  # fewer ticks, or their large labels overlap
                for axis in (*fig.yaxis, *fig.xaxis):
                    ticker = axis.ticker
                    if getattr(ticker, "desired_num_ticks", 0) > SERIES_TICKS:
                        self._set(ticker, desired_num_ticks=SERIES_TICKS)
        if self.layout() == "words" and self._word_series() is not None:
            # A and A* share their rows' words and one colour scale: A* without the
            # words, A without the colour bar (room for the time series beside them)
            self._set(d.heatmaps.fig_softmax.yaxis[0], visible=False)
            for bar in d.heatmaps.fig_attention.select(ColorBar):
                self._set(bar, visible=False)
        if self.layout() == "default":  # numbered tokens: fewer, so that they stay apart
            for fig in (d.heatmaps.fig_attention, d.heatmaps.fig_softmax):
                for axis in (fig.xaxis[0], fig.yaxis[0]):
                    ticks = list(getattr(axis.ticker, "ticks", []))
                    n = len(axis.major_label_overrides) or (max(ticks) + 1 if ticks else 0)
                    fewer = number_ticks(n, HEATMAP_TICKS) if ticks else ticks
                    if fewer != ticks:
                        self._set(axis.ticker, ticks=fewer)
        sphere = d.clustering.fig_tokens
        if sphere in kept:  # a square frame: the unit circle round, not cut
            side = round(SPHERE_FRAME * scale)
            self._set(sphere, frame_width=side, frame_height=side)
            for axis in (*sphere.xaxis, *sphere.yaxis):  # −1, 0, 1 (five crowded)
                self._set(axis.ticker, desired_num_ticks=3)
        if d.trajectories.fig in kept:  # axis labels no longer than the plot is high
            tokens = d.trajectories.fig
            for axis, label in ((tokens.xaxis[0], "PC 1 of X(0)"),
                                (tokens.yaxis[0], "PC 2 of X(0)")):
                self._set(axis, axis_label=label)
        lab = d.lab
        if lab is not None:
            for fig in lab.figures:  # (its long titles: at the axes' size, not cut)
                for obj, values in _text_props(fig, title_font=FONT).items():
                    self._set(obj, **values)
            self._set(lab, projector=True, projector_scale=scale)  # the lab's own layout
        if d.sidebar_toggle.value:
            self._set(d.sidebar_toggle, value=False)
        self._set(d.sidebar, styles={**d.sidebar.styles, **DRAWER_STYLES})
        if self._reopen:
            self._reopen = False
            d.sidebar_toggle.value = True
        for pane in (d.explanation_pane, d.title, d.alert, d.confinement, d.links,
                     d.caption, d.status, d.zero_line):
            if pane.visible:
                self._set(pane, visible=False)
        if d.timeseries.log_kl is False:
            self._set(d.timeseries, log_kl=True)
