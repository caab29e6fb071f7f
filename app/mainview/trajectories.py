"""Token trajectories: a fixed 2-D projection of the features with fading trails.

The projection is fixed per run: the top two principal axes of the first frame's
features (``X`` of the Theory page, shape (N, d)).  Trails are a ring buffer of the
last ``TRAIL`` projected positions; older points are drawn fainter.

The scatters are drawn on the plot's overlay canvas (``level="overlay"``): a new
frame repaints the points alone, not the axes, title and legend (whose text costs
the page more than the points).
"""

from __future__ import annotations

import numpy as np
import panel as pn
from bokeh.models import (
    CDSView,
    ColumnDataSource,
    HoverTool,
    IndexFilter,
    LinearColorMapper,
    Range1d,
)
from bokeh.palettes import Turbo256
from bokeh.plotting import figure

#: The plot's title, without and with the reduced model's run beside.
TITLES = ("Tokens on the principal axes of X(0) (fixed per run)",
          "Tokens (dots) and the reduced model's (rings) on the axes of X(0)")
#: Positions kept per token in the trail ...
TRAIL = 12
#: ... one every this many frames (the trail spans TRAIL × TRAIL_EVERY frames; the
#: page draws every trail point as a marker, the costliest part of this plot).
TRAIL_EVERY = 2


def principal_axes(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean (d,) and the top two principal axes (2, d) of ``X`` (N, d).

    With ``d = 1`` the second axis is zero (tokens move on a line).
    """
    mean = X.mean(axis=0)
    _, _, vt = np.linalg.svd(X - mean, full_matrices=False)
    axes = np.zeros((2, X.shape[1]))
    k = min(2, vt.shape[0])
    axes[:k] = vt[:k]
    return mean, axes


class Trajectories(pn.viewable.Viewer):
    """Scatter of the projected tokens with fading trails; :meth:`update` adds a frame."""

    def __init__(self, **params):
        super().__init__(**params)
        self.fig = figure(
            title=TITLES[False],
            width=440, height=300, x_range=Range1d(-1, 1), y_range=Range1d(-1, 1),
            x_axis_label="PC 1 of X(0) (feature units)",
            y_axis_label="PC 2 of X(0) (feature units)",
            tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above",
        )
        # Colours come from the token index through a mapper: no strings are sent per frame.
        self.colors = LinearColorMapper(palette=Turbo256[20:236], low=0, high=1)
        color = {"field": "token", "transform": self.colors}
        self.trail = ColumnDataSource({"x": [], "y": [], "alpha": [], "token": []})
        self.tokens = ColumnDataSource({"x": [], "y": [], "token": []})
        self.reference = ColumnDataSource({"x": [], "y": [], "token": []})
        self.fig.scatter("x", "y", source=self.trail, size=4, color=color,
                         alpha="alpha", line_color=None, level="overlay")
        r = self.fig.scatter("x", "y", source=self.tokens, size=9, fill_color=color,
                             line_color="black", level="overlay")
        self.fig.scatter("x", "y", source=self.reference, size=11, marker="circle",
                         fill_color=None, line_color="gray", line_width=1.5, level="overlay")
        # the token pointed at (a click here or on a row of a heatmap: Heatmaps.link_tokens)
        self.chosen = IndexFilter(indices=[], name="token_chosen")
        self.fig.scatter("x", "y", source=self.tokens, view=CDSView(filter=self.chosen),
                         size=17, fill_color=None, line_color="#ff2d2d", line_width=3,
                         level="overlay")
        self.fig.add_tools(HoverTool(renderers=[r], tooltips=[
            ("token", "@token"), ("click", "outline its rows of A and A*")]))
        self.clear()

    def show_reference(self, shown: bool) -> None:
        """Say in the title what the rings are while the reduced model runs beside.

        (The title, not a legend: a legend beside points that move every frame would be
        repainted with them, or drawn once without its markers.)
        """
        self.fig.title.text = TITLES[bool(shown)]

    def clear(self) -> None:
        """Forget the projection and the trails (a new run)."""
        self.mean = self.axes = None
        self.buffer = None
        self.count = self.frames = 0
        for src in (self.trail, self.tokens, self.reference):
            src.data = {k: [] for k in src.data}

    def project(self, X: np.ndarray) -> np.ndarray:
        """Coordinates (N, 2) of ``X`` (N, d) on the run's fixed axes."""
        return (X - self.mean) @ self.axes.T

    def update(self, frame, reference=None) -> None:
        """Add the features of ``frame`` (and of the reduced run's frame, if given)."""
        X = frame.features
        if self.axes is None or self.buffer.shape[1] != X.shape[0]:
            if self.buffer is not None and self.chosen.indices:
                self.chosen.indices = []  # another number of tokens
            self.mean, self.axes = principal_axes(X)
            self.buffer = np.zeros((TRAIL, X.shape[0], 2))
            self.count = self.frames = 0
            self.colors.high = max(X.shape[0] - 1, 1)
        xy = self.project(X)
        if not np.all(np.isfinite(xy)):
            return
        self._fit_ranges(xy, fresh=self.count == 0)
        n = X.shape[0]
        if self.frames % TRAIL_EVERY == 0:  # a new trail point: the trail changes
            self.buffer[self.count % TRAIL] = xy
            self.count += 1
            k = min(self.count, TRAIL)
            order = (np.arange(self.count - k, self.count)) % TRAIL  # oldest first
            pts = self.buffer[order]  # (k, N, 2)
            alpha = np.repeat(np.linspace(0.05, 0.6, k), n)
            self.trail.data = {
                "x": pts[..., 0].ravel(), "y": pts[..., 1].ravel(), "alpha": alpha,
                "token": np.tile(np.arange(n, dtype=np.int32), k),
            }
        self.frames += 1
        self.tokens.data = {"x": xy[:, 0], "y": xy[:, 1], "token": np.arange(n, dtype=np.int32)}
        if reference is not None:
            ref = self.project(reference.features)
            if np.all(np.isfinite(ref)):
                self.reference.data = {"x": ref[:, 0], "y": ref[:, 1], "token": np.arange(n)}
        elif len(self.reference.data["x"]):
            self.reference.data = {"x": [], "y": [], "token": []}

    def _fit_ranges(self, xy: np.ndarray, fresh: bool) -> None:
        """Grow (or, for a new run, set) the axes so every token stays in view.

        Ranges change only when a token leaves the view, so the plot is not laid
        out again at every frame.
        """
        for rng, values in ((self.fig.x_range, xy[:, 0]), (self.fig.y_range, xy[:, 1])):
            lo, hi = float(values.min()), float(values.max())
            pad = 0.15 * max(hi - lo, 1e-6) + 1e-3
            if fresh:
                rng.update(start=lo - pad, end=hi + pad)
            elif lo < rng.start or hi > rng.end:
                span = rng.end - rng.start
                rng.update(start=min(rng.start, lo - 0.25 * span),
                           end=max(rng.end, hi + 0.25 * span))

    def __panel__(self):
        return pn.pane.Bokeh(self.fig)
