"""Annotations of a guided-tour step drawn on the time series (Theory page: tracking the
moving softmax, reference models).

- ``"kl_slope"``: on the logarithmic KL plot, a dashed line of slope ``−2λ``
  (``λ = γ/β``) through the lag at the first frame after ``t_anchor``: the lag of a
  fixed target falls on it once the start is forgotten.
- ``"tracking_bound"``: on the logarithmic KL plot, the tracking bound is drawn thick
  where it is tight (the lag at least a tenth of the bound).
- ``"conserved_energy"``: on the energy plot, the zero line labelled "H(t) = H(0)": a
  conserved energy stays on it.
- ``"noise_level"``: on the KL plots, the predicted stationary lag under logit noise,
  ``½ s² Σᵢ (1 − Σⱼ A*ᵢⱼ²)`` with ``s² = σ²/2λ`` (Theory page: stochastic logits;
  :func:`dynamics.noise.small_noise_kl`), a dashed line the lag fluctuates around; the
  tracking bound (hundreds of times the lag there) is not drawn, so the axes stay on the
  lag (:attr:`Guides.hidden_lines`).
- ``"quench"``: the change markers (always drawn, see :mod:`app.mainview.markers`); their
  labels do not pile up (:func:`app.mainview.markers.change_marks`).

The guides follow the rows pushed to the plots (:meth:`Guides.rows`); a new run or a new
λ re-anchors the slope.
"""

from __future__ import annotations

import math

from bokeh.models import ColumnDataSource, Label, Span

#: The annotations a tour step may name.
ANNOTATIONS = ("kl_slope", "tracking_bound", "conserved_energy", "noise_level", "quench")
#: The lines of the time series an annotation leaves out (they would squash its axis).
HIDES = {"noise_level": ("kl_bound", "kl_bound_log")}
#: The slope guide goes through the lag at the first row at or after this time.
T_ANCHOR = 5.0
#: The slope guide's length after its anchor (model time units).
GUIDE_LENGTH = 12.0
#: The bound is "tight" where the lag is at least this fraction of it.
TIGHT = 0.1
#: Guide colours (dark enough for a projector).
GUIDE_COLOR, TIGHT_COLOR = "#111111", "#d62728"
#: The guides' labels: on a white ground, so that no line crosses them out.
LABEL_STYLE = {"text_font_size": "12pt", "text_color": GUIDE_COLOR,
               "background_fill_color": "white", "background_fill_alpha": 0.85}


class Guides:
    """The annotations of one tour step on ``timeseries``'s plots (none at first)."""

    def __init__(self, timeseries, rollover: int):
        self.ts = timeseries
        self.rollover = rollover
        self.kinds: tuple[str, ...] = ()
        self.lam = math.nan
        self._anchor = None  # (t, kl) of the slope guide
        self._after = T_ANCHOR  # the slope is anchored at the first row from this time
        fig = timeseries.fig_kl_log
        self.slope = ColumnDataSource({"t": [], "kl": []})
        self.slope_line = fig.line("t", "kl", source=self.slope, color=GUIDE_COLOR,
                                   line_dash="dashed", line_width=2, level="overlay",
                                   visible=False)
        # above the dashes, on white: drawn under them it was crossed out
        self.slope_label = Label(x=0, y=0, text="", x_offset=8, y_offset=12, visible=False,
                                 **LABEL_STYLE)
        fig.add_layout(self.slope_label)
        self.tight = ColumnDataSource({"t": [], "bound": []})
        self.tight_points = fig.scatter("t", "bound", source=self.tight, size=6,
                                        color=TIGHT_COLOR, alpha=0.6, visible=False)
        self.zero = Span(location=0.0, dimension="width", line_color=GUIDE_COLOR,
                         line_dash="dashed", line_width=2, visible=False)
        self.zero_label = Label(x=8, y=0.0, x_units="screen", y_offset=6,
                                text="conserved: H(t) = H(0)", visible=False, **LABEL_STYLE)
        timeseries.fig_energy.add_layout(self.zero)
        timeseries.fig_energy.add_layout(self.zero_label)
        self.level = math.nan
        self.level_lines = {}
        for kl_fig in (timeseries.fig_kl, timeseries.fig_kl_log):
            span = Span(location=1.0, dimension="width", line_color=GUIDE_COLOR,
                        line_dash="dashed", line_width=2, visible=False)
            label = Label(x=8, y=1.0, x_units="screen", y_offset=6, text="", visible=False,
                          **LABEL_STYLE)
            kl_fig.add_layout(span)
            kl_fig.add_layout(label)
            self.level_lines[kl_fig] = (span, label)

    @property
    def hidden_lines(self) -> frozenset:
        """The time series' lines the annotations shown leave out (keys of
        ``TimeSeries.lines``)."""
        return frozenset(k for kind in self.kinds for k in HIDES.get(kind, ()))

    def show(self, kinds=(), lam: float = math.nan, level: float = math.nan) -> None:
        """Draw the annotations ``kinds`` (names of :data:`ANNOTATIONS`) with relaxation
        rate ``lam`` and predicted noise level ``level`` (``"noise_level"``); ``()``
        removes them."""
        unknown = [k for k in kinds if k not in ANNOTATIONS]
        if unknown:
            raise ValueError(f"unknown annotation(s) {unknown}; known: {', '.join(ANNOTATIONS)}")
        self.kinds, self.lam, self.level = tuple(kinds), float(lam), float(level)
        on = "noise_level" in self.kinds and math.isfinite(self.level) and self.level > 0
        for span, label in self.level_lines.values():
            span.update(location=self.level if on else 1.0, visible=on)
            label.update(y=self.level if on else 1.0, visible=on,
                         text=f"predicted ½ s² Σᵢ(1 − Σⱼ A*ᵢⱼ²) = {self.level:.3g}" if on else "")
        self.ts.hide_lines(self.hidden_lines)
        self.clear()
        self.slope_line.visible = self.slope_label.visible = "kl_slope" in self.kinds
        self.tight_points.visible = "tracking_bound" in self.kinds
        self.zero.visible = self.zero_label.visible = "conserved_energy" in self.kinds
        data = self.ts.source.data
        if len(data["t"]):
            self.rows([{k: data[k][i] for k in ("t", "kl_log", "kl", "kl_bound",
                                                 "kl_bound_log")}
                       for i in range(len(data["t"]))])

    def retune(self, lam: float, t: float) -> None:
        """λ changed at time ``t`` (β or γ moved mid-run): the slope guide is drawn
        again from the first row after ``t``."""
        if "noise_level" in self.kinds:  # (predicted for the old λ)
            for span, label in self.level_lines.values():
                span.visible = label.visible = False
        if "kl_slope" in self.kinds:
            self.lam, self._anchor, self._after = float(lam), None, float(t)
            self.slope.data = {"t": [], "kl": []}

    def clear(self) -> None:
        """Forget the rows (a new run): the slope is anchored again."""
        self._anchor, self._after = None, T_ANCHOR
        self.slope.data = {"t": [], "kl": []}
        self.tight.data = {"t": [], "bound": []}

    def rows(self, rows) -> None:
        """Follow the rows just pushed to the plots."""
        if "kl_slope" in self.kinds and self._anchor is None and math.isfinite(self.lam):
            row = next((r for r in rows if r["t"] >= self._after and r["kl"] > 0), None)
            if row is not None:
                self._anchor = (row["t"], row["kl"])
                t0, kl0 = self._anchor
                ts = [max(0.0, t0 - GUIDE_LENGTH), t0 + GUIDE_LENGTH]
                self.slope.data = {"t": ts,
                                   "kl": [kl0 * math.exp(-2 * self.lam * (t - t0)) for t in ts]}
                self.slope_label.update(x=t0, y=kl0,
                                        text=f"slope −2λ = {-2 * self.lam:.3g}")
        if "tracking_bound" in self.kinds:
            tight = [r for r in rows if r["kl"] >= TIGHT * r["kl_bound"] > 0]
            if tight:
                self.tight.stream({"t": [r["t"] for r in tight],
                                   "bound": [r["kl_bound_log"] for r in tight]},
                                  rollover=self.rollover)
