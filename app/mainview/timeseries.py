"""Streaming time series: the KL lag and its bound, the energy balance, the
dissipation rate and the distance to the reduced model (Theory page: tracking, energy
balance, coupled models).

All figures share one ``ColumnDataSource`` that grows by one row per frame with
``stream(..., rollover=ROLLOVER)``, so memory stays bounded.  What a model's spec says
of its diagnostics shows in the legends: one it does not define (NaN,
``spec.not_applicable``) is stored as 0, its line hidden and labelled "n/a"; one that
vanishes by construction (``spec.identically_zero``) is hidden and labelled "≡ 0"; a
plot left without a line is not shown at all (its room goes to the plots that carry
data) and :func:`zero_text` says in one line what is ≡ 0 and why: no NaN, no rounding
noise drawn as if it were a curve, and no empty axes.

Drawing cost: the lines are on the plots' overlay canvas and the legends below the
plots (where they cover no curve), and the axes follow the data in steps
(:class:`app.mainview.ranges.SteppedRange`), so a new batch of rows usually repaints the lines
alone, not the axes, ticks, title and legend around them (Bokeh reads the page's CSS
for every text it draws).

Mid-run setting changes are marked on the energy and KL plots (:mod:`app.mainview.markers`);
a guided-tour step's annotations are drawn by :mod:`app.mainview.guides`.
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import param
from bokeh.core.properties import value
from bokeh.events import Reset
from bokeh.models import ColumnDataSource, Label
from bokeh.palettes import Category10_10 as C

from app.models import not_applicable, spec

from .guides import Guides
from .markers import ChangeMarkers
from .model_lines import DIAGNOSTIC, MOMENTUM_TERM, legend_states, zero_text  # noqa: F401
from .plots import legend_below, time_figure
from .ranges import LOG_FLOOR, TRIM, SteppedRange, log_extent
from .series_plots import (  # noqa: F401  (ENERGY_TITLE: the slides' too)
    ENERGY_TITLE,
    KINETIC_AXIS,
    MOMENTUM_AXIS,
    RIGHT_AXIS,
    energy_figure,
    kl_figures,
)

#: Rows kept in the time-series buffer.
ROLLOVER = 1000
#: Frames per batch pushed to the browser (the plots are redrawn at frame rate / BATCH:
#: 5 times a second at 40 frames/s). Measured: a batch costs the page about 50 ms (8
#: lines re-indexed, 3 plots and their legends repainted), as much as 2 to 3 frames of
#: heatmaps and tokens; 8 rather than 5 raised the page's frame rate by about 15 %.
BATCH = 8
COLUMNS = ("t", "kl", "kl_bound", "kl_log", "kl_bound_log", "d_energy", "budget",
           "d_potential", "dissipated", "residual", "dissipation_rate", "distance", "distance_t",
           "momentum")


def _finite(x) -> float:
    x = float(x)
    return x if math.isfinite(x) else 0.0


class TimeSeries(pn.viewable.Viewer):
    """The time-series panel; :meth:`update` appends one frame."""

    log_kl = param.Boolean(default=True, doc="Draw the KL lag on a logarithmic axis.")

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource({c: [] for c in COLUMNS})
        self.e0 = self.phi0 = None
        self.pending = []
        self.lines = {}
        src = self.source

        self.fig_kl, self.fig_kl_log = kl_figures(src, self.lines)
        self.fig_energy, self.right_axis = energy_figure(src, self.lines)

        self.fig_rate = time_figure("Dissipation rate D(t) = γ Σᵢ Var_Aᵢ(Cᵢ)",
                                    "D (score units / time)")
        self.lines["dissipation_rate"] = self.fig_rate.line(
            "t", "dissipation_rate", source=src, color=C[4], line_width=2,
            legend_label="D(t)")
        self.fig_distance = time_figure("Distance to the reduced (softmax-slaved) model",
                                        "‖X − Xᵣ‖")
        self.lines["distance"] = self.fig_distance.line(
            "distance_t", "distance", source=src, color=C[5], line_width=2,
            legend_label="‖X − Xᵣ‖, Xᵣ: the reduced run")
        for fig in (self.fig_rate, self.fig_distance):
            legend_below(fig, ncols=1)
        self.figures = (self.fig_kl, self.fig_kl_log, self.fig_energy, self.fig_rate,
                        self.fig_distance)
        self._legend_items = {
            key: item for fig in self.figures for item in fig.legend[0].items
            for key, r in self.lines.items() if item.renderers[0] is r
        }
        self._labels = {k: item.label.value for k, item in self._legend_items.items()}
        self._hidden = ColumnDataSource({c: [] for c in COLUMNS})
        for r in self.lines.values():
            r.level = "overlay"
        # the columns each figure shows, and its stepped x and y ranges
        self._fig_columns = {
            fig: [k for k, r in self.lines.items() if r in fig.renderers]
            for fig in self.figures}
        self._ranges = {
            fig: (SteppedRange(fig.x_range, trim=TRIM, min_span=1.0),
                  SteppedRange(fig.y_range, log=fig is self.fig_kl_log))
            for fig in self.figures}
        # the energy plot's right-hand axis follows its own lines
        self._ranges[self.fig_energy] += (
            SteppedRange(self.fig_energy.extra_y_ranges["right"]),)
        for fig, ranges in self._ranges.items():
            fig.on_event(Reset, lambda event, ranges=ranges: self._follow(ranges))
        # the plots none of whose lines the model has (not shown)
        self._empty = frozenset()
        self._model = None  # the model whose lines are drawn (set_model)
        self._left_out = frozenset()  # lines a tour step's guide leaves out (hide_lines)
        self._distance_on = False
        # mid-run setting changes: rows of one source, a line, a band and a label each
        self.change_markers = ChangeMarkers((self.fig_energy, self.fig_kl, self.fig_kl_log))
        #: the change markers' rows (:attr:`ChangeMarkers.source`)
        self.marker_source = self.change_markers.source
        self._diverged_note = Label(
            x=12, y=12, x_units="screen", y_units="screen", text="", text_font_size="11pt",
            text_color="#d7301f", visible=False)
        self.fig_distance.add_layout(self._diverged_note)
        self._ref_end = None  # (t, distance) where the comparison run diverged
        self.guides = Guides(self, ROLLOVER)  # a tour step's annotations
        #: (t_min, t_max, y_min, y_max) of drawn curves not in ``source`` that a figure's
        #: ranges include: the pinned runs' ghosts (:class:`app.teaching.pinned.PinnedRuns`)
        self.ghost_extent = {}
        self._show(self.fig_distance, False)
        self._toggle_log()

    @param.depends("log_kl", watch=True)
    def _toggle_log(self):
        for fig in (self.fig_kl, self.fig_kl_log):
            self._show(fig, self._wanted(fig))

    def _wanted(self, fig) -> bool:
        """Whether ``fig`` is shown (the KL plot of the chosen axis; none left empty)."""
        if fig in self._empty:
            return False
        if fig is self.fig_distance:
            return self._distance_on
        if fig in (self.fig_kl, self.fig_kl_log):
            return (fig is self.fig_kl_log) == self.log_kl
        return True

    def show_distance(self, visible: bool) -> None:
        """Show or hide the comparison-mode distance plot."""
        self._distance_on = visible
        self._show(self.fig_distance, self._wanted(self.fig_distance))

    def _show(self, fig, visible: bool) -> None:
        """Show or hide ``fig``; a hidden figure's lines and change markers draw from
        empty sources, so that the rows streamed and the changes marked meanwhile do not
        make the page repaint a plot nobody sees: a hidden plot's axes measure 0×0, so
        each repaint lays it out again (a β slider change cost the page ~80 ms for the
        hidden linear KL plot)."""
        fig.visible = visible
        for key in self._fig_columns[fig]:
            self.lines[key].data_source = self.source if visible else self._hidden
        self.change_markers.show(fig, visible)
        if visible:
            self.fit_ranges()

    def set_model(self, model: str) -> None:
        """Legends and lines by what model ``model``'s spec says of its diagnostics
        (:func:`legend_states`); a plot with no line left is hidden (:attr:`empty`), and
        the energy plot's right-hand axis is named by what its line draws."""
        self._model = model
        self._set_lines()
        missing, zero = set(not_applicable(model)), set(spec(model).identically_zero)
        self.right_axis.visible = self.lines["momentum"].visible
        self.right_axis.axis_label = (MOMENTUM_AXIS if "kinetic_energy" in missing
                                      else KINETIC_AXIS)
        self._empty = frozenset(
            fig for fig in self.figures
            if all(DIAGNOSTIC.get(k) in zero for k in self._fig_columns[fig]))
        for fig in self.figures:
            if fig.visible != self._wanted(fig):
                self._show(fig, self._wanted(fig))

    def _set_lines(self) -> None:
        for key, (label, drawn, listed) in legend_states(self._model, self._labels).items():
            item = self._legend_items[key]
            item.label = value(label)
            self.lines[key].visible = drawn and key not in self._left_out
            item.visible = listed and key not in self._left_out

    def hide_lines(self, keys) -> None:
        """Leave out the lines ``keys`` (a tour step's annotation asks it: its guide's
        axis stays on what it is about), the others as the model has them; the plots
        shown stay as they are."""
        self._left_out = frozenset(keys)
        if self._model is not None:
            self._set_lines()
        self.fit_ranges()

    def clear(self) -> None:
        """Empty the buffers (a new run)."""
        self.source.data = {c: [] for c in COLUMNS}
        self.e0 = self.phi0 = None
        self.pending = []
        self.change_markers.clear()
        self.guides.clear()
        self._ref_end = None
        self._diverged_note.visible = False
        for ranges in self._ranges.values():
            self._follow(ranges)

    def _follow(self, ranges) -> None:
        for rng in ranges:
            rng.follow()
        self.fit_ranges()

    def fit_ranges(self) -> None:
        """Fit the stepped ranges of every shown figure to the rows of its visible lines."""
        data = self.source.data
        if len(data["t"]) == 0:
            return
        t = np.asarray(data["t"], dtype=float)
        for fig, (x_range, y_range, *right) in self._ranges.items():
            if not fig.visible:  # a hidden plot whose range changes is laid out again
                continue
            ghost = self.ghost_extent.get(fig)
            t0, t1 = float(t[0]), float(t[-1])
            if ghost is not None:
                t0, t1 = min(t0, ghost[0]), max(t1, ghost[1])
            x_range.fit(t0, t1)
            shown = [k for k in self._fig_columns[fig] if self.lines[k].visible]
            groups = [([k for k in shown if k not in RIGHT_AXIS], y_range, True)]
            if right:
                groups.append(([k for k in shown if k in RIGHT_AXIS], right[0], False))
            for keys, rng, ghosts in groups:
                if not keys:
                    continue
                values = [np.asarray(data[k], dtype=float) for k in keys]
                if rng.log:  # the floor stands for 0: it does not stretch a log axis
                    lo, hi = log_extent(values)
                else:
                    lo = min(float(v.min()) for v in values)
                    hi = max(float(v.max()) for v in values)
                if ghost is not None and ghosts:
                    lo, hi = min(lo, ghost[2]), max(hi, ghost[3])
                rng.fit(lo, hi)

    def row(self, frame, distance: float | None = None) -> dict:
        """The buffer row of ``frame`` (every value finite)."""
        d = frame.diagnostics
        energy, phi = _finite(d["hamiltonian"]), _finite(d["potential"])
        if self.e0 is None:
            self.e0, self.phi0 = energy, phi
        kl, bound = _finite(d["kl"]), _finite(d["kl_bound"])
        dissipated, work = _finite(d["dissipated"]), _finite(d["work"])
        row = {
            "t": _finite(d["t"]), "kl": kl, "kl_bound": bound,
            "kl_log": max(kl, LOG_FLOOR), "kl_bound_log": max(bound, LOG_FLOOR),
            "d_energy": energy - self.e0, "budget": work - dissipated,
            "d_potential": phi - self.phi0, "dissipated": dissipated,
            "residual": _finite(d["energy_residual"]),
            "dissipation_rate": _finite(d["dissipation_rate"]),
            "distance": _finite(distance) if distance is not None else 0.0,
            "distance_t": _finite(d["t"]), "momentum": _finite(d["momentum_energy"]),
        }
        if self._ref_end is not None:  # no more distance: its points collapse onto the last
            row["distance_t"], row["distance"] = self._ref_end
        return row

    def reference_diverged(self, t: float) -> bool:
        """The comparison run diverged at ``t``: the distance stops there (later rows
        repeat its last point, drawn as nothing) and its plot says so; whether that is
        news."""
        if self._ref_end is not None:
            return False
        data = self.source.data
        last = (self.pending[-1] if self.pending else
                {k: data[k][-1] for k in ("distance_t", "distance")} if len(data["t"]) else
                {"distance_t": t, "distance": 0.0})
        self._ref_end = (float(last["distance_t"]), float(last["distance"]))
        self._diverged_note.update(text=f"reference diverged at t = {t:.4g}", visible=True)
        return True

    def mark_changes(self, changes) -> None:
        """A vertical line labelled like "β 1 → 4" at each mid-run setting change
        (:attr:`dynamics.Simulation.changes`) on the energy and KL plots; ``()`` removes
        them all (a new run). The changes of one slider drag, and changes whose labels
        would overlap by the time shown, make one marker: a line where they began, a light
        band over the time they lasted, and one label from the first value to the last
        (:class:`app.mainview.markers.ChangeMarkers`).
        """
        x = self.fig_kl_log.x_range
        span = max(float(x.end) - float(x.start), 0.0)
        self.change_markers.mark(changes, self.source.data["t"], span)

    @property
    def markers(self) -> list[tuple[float, float, str]]:
        """The change markers shown: ``(t_first, t_last, label)`` each."""
        return self.change_markers.markers

    @property
    def legend_items(self) -> dict:
        """The legend item of each line, by its column: ``{key: LegendItem}``."""
        return dict(self._legend_items)

    @property
    def figure_columns(self) -> dict:
        """The columns each figure draws: ``{figure: (key, ...)}``."""
        return {fig: tuple(keys) for fig, keys in self._fig_columns.items()}

    @property
    def empty(self) -> frozenset:
        """The plots not shown because the model has none of their lines (each ≡ 0 by
        construction: :func:`zero_text` says so)."""
        return self._empty

    @property
    def diverged_note(self):
        """The distance plot's note "reference diverged at t = …" (a Bokeh ``Label``,
        shown once the comparison run diverged)."""
        return self._diverged_note

    def update(self, frame, distance: float | None = None, flush: bool = True) -> None:
        """Append ``frame`` (and the distance to the reduced run, if comparing).

        With ``flush=False`` rows are pushed in batches of ``BATCH`` frames: a redraw
        of these plots costs the browser far more than the data.
        """
        self.pending.append(self.row(frame, distance))
        if flush or len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Push the pending rows to the plots, as one message behind any frame still
        queued for the page (a stream outside a hold goes out at once, and could land
        before the rows streamed just ahead of it: a run paused, ended or stopped)."""
        if self.pending:
            rows, self.pending = self.pending, []
            with pn.io.hold():
                self.source.stream({k: [r[k] for r in rows] for k in COLUMNS},
                                   rollover=ROLLOVER)
                self.guides.rows(rows)
                self.fit_ranges()

    def __panel__(self):
        """The KL, energy and rate plots in a row (the distance plot is placed by the caller)."""
        return pn.Column(
            pn.Row(pn.pane.Bokeh(self.fig_kl), pn.pane.Bokeh(self.fig_kl_log),
                   pn.pane.Bokeh(self.fig_energy), pn.pane.Bokeh(self.fig_rate)),
        )
