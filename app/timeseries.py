"""Streaming time series: the KL lag and its bound, the energy balance, the
dissipation rate and the distance to the reduced model (MODEL.md §4, §5, §7, §9).

All figures share one ``ColumnDataSource`` that grows by one row per frame with
``stream(..., rollover=ROLLOVER)``, so memory stays bounded.  Diagnostics a model
does not define (NaN, ``NOT_APPLICABLE``) are stored as 0 and their lines hidden
and labelled "n/a": no NaN ever reaches a plot.
"""

from __future__ import annotations

import math

import panel as pn
import param
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource
from bokeh.palettes import Category10_10 as C
from bokeh.plotting import figure

from dynamics import NOT_APPLICABLE

#: Rows kept in the time-series buffer.
ROLLOVER = 1000
#: Frames per batch pushed to the browser (the plots are redrawn at frame rate / BATCH).
BATCH = 5
#: Floor of values drawn on the logarithmic KL axis.
LOG_FLOOR = 1e-12
COLUMNS = ("t", "kl", "kl_bound", "kl_log", "kl_bound_log", "d_energy", "budget",
           "d_potential", "dissipated", "residual", "dissipation_rate", "distance")
_TIME = "t (model time units)"
#: Lines drawing a diagnostic that some models leave undefined.
_DIAGNOSTIC = {"kl_bound": "kl_bound", "kl_bound_log": "kl_bound",
               "residual": "energy_residual"}


def _finite(x) -> float:
    x = float(x)
    return x if math.isfinite(x) else 0.0


def _figure(title, y_label, **kw):
    p = figure(title=title, height=260, width=455, x_axis_label=_TIME, y_axis_label=y_label,
               tools="pan,wheel_zoom,box_zoom,reset,save,hover",
               tooltips=[("t", "@t{0.000}"), ("value", "$y{0.0000e}")],
               toolbar_location="above", **kw)
    return p


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

        self.fig_kl = _figure("Attention lag Σᵢ KL(Aᵢ‖A*ᵢ)", "KL (nats)")
        self.fig_kl_log = _figure("Attention lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)", "KL (nats)",
                                  y_axis_type="log")
        for fig, suffix in ((self.fig_kl, ""), (self.fig_kl_log, "_log")):
            self.lines["kl" + suffix] = fig.line(
                "t", "kl" + suffix, source=src, color=C[0], line_width=2,
                legend_label="Σ KL(Aᵢ‖A*ᵢ)")
            self.lines["kl_bound" + suffix] = fig.line(
                "t", "kl_bound" + suffix, source=src, color=C[3], line_dash="dashed",
                line_width=2, legend_label="tracking bound Σ Bᵢ²/8")
            fig.legend.location = "top_right"
            fig.legend.click_policy = "hide"

        self.fig_energy = _figure("Energy balance (zero residual ⇔ dissipation law)",
                                  "energy (score units)")
        for key, label, color, dash in (
            ("d_energy", "H(t) − H(0)", C[0], "solid"),
            ("budget", "work − dissipated", C[1], "dashed"),
            ("d_potential", "Φ(t) − Φ(0)", C[2], "dotted"),
            ("dissipated", "dissipated ∫D dt", C[4], "solid"),
            ("residual", "residual H−H(0)+diss.−work", C[3], "solid"),
        ):
            self.lines[key] = self.fig_energy.line(
                "t", key, source=src, color=color, line_dash=dash, line_width=2,
                legend_label=label)
        self.fig_energy.legend.location = "bottom_left"
        self.fig_energy.legend.click_policy = "hide"

        self.fig_rate = _figure("Dissipation rate D(t) = γ Σᵢ Var_Aᵢ(Cᵢ)",
                                "D (score units / time)")
        self.lines["dissipation_rate"] = self.fig_rate.line(
            "t", "dissipation_rate", source=src, color=C[4], line_width=2,
            legend_label="D(t)")
        self.fig_distance = _figure("Distance to the reduced (softmax-slaved) model",
                                    "‖X − X_reduced‖")
        self.lines["distance"] = self.fig_distance.line(
            "t", "distance", source=src, color=C[5], line_width=2,
            legend_label="‖X − X_reduced‖ (Frobenius)")
        for fig in (self.fig_rate, self.fig_distance):
            fig.legend.location = "top_left"
        self._legend_items = {
            key: item for fig in (self.fig_kl, self.fig_kl_log, self.fig_energy,
                                  self.fig_rate, self.fig_distance)
            for item in fig.legend[0].items
            for key, r in self.lines.items() if item.renderers[0] is r
        }
        self._labels = {k: item.label.value for k, item in self._legend_items.items()}
        for fig in (self.fig_kl, self.fig_kl_log, self.fig_energy, self.fig_rate,
                    self.fig_distance):
            fig.legend.label_text_font_size = "9pt"
            fig.legend.background_fill_alpha = 0.7
            fig.legend.padding = 4
            fig.legend.spacing = 0
        self.fig_distance.visible = False
        self._toggle_log()

    @param.depends("log_kl", watch=True)
    def _toggle_log(self):
        self.fig_kl.visible = not self.log_kl
        self.fig_kl_log.visible = self.log_kl

    def show_distance(self, visible: bool) -> None:
        """Show or hide the comparison-mode distance plot."""
        self.fig_distance.visible = visible

    def set_model(self, model: str) -> None:
        """Label the energy by model and mark the diagnostics it does not define n/a."""
        energy = "F" if model == "attention" else ("Φ" if model == "transformer" else "H")
        missing = set(NOT_APPLICABLE.get(model, ()))
        labels = dict(self._labels)
        labels["d_energy"] = f"{energy}(t) − {energy}(0)"
        labels["residual"] = f"residual {energy}−{energy}(0)+diss.−work"
        for key, item in self._legend_items.items():
            na = _DIAGNOSTIC.get(key) in missing
            item.label = value(labels[key] + (" — n/a for this model" if na else ""))
            self.lines[key].visible = not na

    def clear(self) -> None:
        """Empty the buffers (a new run)."""
        self.source.data = {c: [] for c in COLUMNS}
        self.e0 = self.phi0 = None
        self.pending = []

    def row(self, frame, distance: float | None = None) -> dict:
        """The buffer row of ``frame`` (every value finite)."""
        d = frame.diagnostics
        energy, phi = _finite(d["hamiltonian"]), _finite(d["potential"])
        if self.e0 is None:
            self.e0, self.phi0 = energy, phi
        kl, bound = _finite(d["kl"]), _finite(d["kl_bound"])
        dissipated, work = _finite(d["dissipated"]), _finite(d["work"])
        return {
            "t": _finite(d["t"]), "kl": kl, "kl_bound": bound,
            "kl_log": max(kl, LOG_FLOOR), "kl_bound_log": max(bound, LOG_FLOOR),
            "d_energy": energy - self.e0, "budget": work - dissipated,
            "d_potential": phi - self.phi0, "dissipated": dissipated,
            "residual": _finite(d["energy_residual"]),
            "dissipation_rate": _finite(d["dissipation_rate"]),
            "distance": _finite(distance) if distance is not None else 0.0,
        }

    def update(self, frame, distance: float | None = None, flush: bool = True) -> None:
        """Append ``frame`` (and the distance to the reduced run, if comparing).

        With ``flush=False`` rows are pushed in batches of ``BATCH`` frames: a redraw
        of these plots costs the browser far more than the data.
        """
        self.pending.append(self.row(frame, distance))
        if flush or len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Push the pending rows to the plots."""
        if self.pending:
            rows, self.pending = self.pending, []
            self.source.stream({k: [r[k] for r in rows] for k in COLUMNS}, rollover=ROLLOVER)

    def __panel__(self):
        """The KL, energy and rate plots in a row (the distance plot is placed by the caller)."""
        return pn.Column(
            pn.Row(pn.pane.Bokeh(self.fig_kl), pn.pane.Bokeh(self.fig_kl_log),
                   pn.pane.Bokeh(self.fig_energy), pn.pane.Bokeh(self.fig_rate)),
        )
