"""The two plots of the base case, momentum on a quadratic: ``f − f*`` on log–log axes
with the ``(r − 1)²|x₀|²/(2t²)`` guide, and the paths of one token in the plane, filled
from a :class:`~dynamics.inertial.momentum.MomentumResult`."""

from __future__ import annotations

import math

import numpy as np
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from app.mainview.plots import legend_below
from dynamics.inertial.experiments import Curve
from dynamics.inertial.momentum import RUNS, TRACKED

from .plotting import COLORS, FIGURE_OPTIONS, decade_ticker, fit_log_axis, log_figure

#: Colour and dash of each run of the momentum plots (:data:`dynamics.inertial.momentum.RUNS`).
RUN_STYLES = {"gradient_flow": ("#7f7f7f", "solid"), "heavy_ball": (COLORS[0], "dashdot"),
              "critical": (COLORS[2], "dashed"), "nesterov": (COLORS[1], "solid")}


def _run_lines(fig, x: str, y: str, legend: bool = True) -> tuple[dict, dict]:
    """One line per run (:data:`RUNS`) in its style: their sources and renderers (named
    in ``fig``'s legend where ``legend``)."""
    sources = {k: ColumnDataSource({x: [], y: []}) for k in RUNS}
    lines = {}
    for k, src in sources.items():
        color, dash = RUN_STYLES[k]
        named = {"legend_label": k.replace("_", " ")} if legend else {}
        lines[k] = fig.line(x, y, source=src, color=color, line_dash=dash, line_width=2,
                            **named)
    return sources, lines


class MomentumPlots:
    """The figures of the momentum runs (``gap_fig``, ``path_fig``), their sources and
    lines (one per run, keyed as :data:`RUNS`)."""

    def __init__(self):
        m = log_figure("Momentum on a quadratic: f − f*", "time t", "f(x(t)) − f*",
                       x_axis_type="log", x_range=Range1d(0.1, 100.0))
        self.gap_src, self.gap_lines = _run_lines(m, "t", "f")
        self.bound_src = ColumnDataSource({"t": [], "f": []})
        m.line("t", "f", source=self.bound_src, color="black", line_dash="dotted",
               line_width=2, legend_label="(r−1)²|x₀|²/(2t²)")
        legend_below(m, ncols=2, label_width=110)
        self.gap_fig = m

        p = figure(title=f"Path of token {TRACKED + 1} in the plane", x_axis_label="x₁",
                   y_axis_label="x₂", match_aspect=True, **FIGURE_OPTIONS)
        # the runs' colours are named once, under the left plot: two columns of their
        # long labels here were wider than the plot at 1024 px (the page scrolled sideways)
        self.path_src, self.path_lines = _run_lines(p, "x", "y", legend=False)
        self.start_src = ColumnDataSource({"x": [], "y": []})
        p.scatter("x", "y", source=self.start_src, size=9, color="black",
                  legend_label="start (at rest)")
        p.scatter([0.0], [0.0], size=12, marker="cross", color="black", line_width=2,
                  legend_label="minimum")
        legend_below(p, ncols=2, label_width=90)
        self.path_fig = p
        self.figures = (self.gap_fig, self.path_fig)

    def show(self, r) -> str:
        """Map a :class:`~dynamics.inertial.momentum.MomentumResult` into the sources;
        returns the status line."""
        curves = []
        for k in RUNS:  # a run left out (the heavy ball at the critical α) is hidden
            run = r.runs.get(k)
            gap = run.gap_curve() if run is not None else Curve(np.zeros(0), np.zeros(0))
            path = run.path() if run is not None else Curve(np.zeros(0), np.zeros(0))
            self.gap_src[k].data = {"t": gap.x, "f": gap.y}
            self.path_src[k].data = {"x": path.x, "y": path.y}
            self.gap_lines[k].visible = self.path_lines[k].visible = run is not None
            curves += [gap] if run is not None else []
        self.bound_src.data = {"t": r.bound.x, "f": r.bound.y}
        # the legend names the runs as run
        for item, key in zip(self.gap_fig.legend[0].items, RUNS, strict=False):
            item.visible = key in r.runs
            if key in r.runs:
                item.label = value(r.runs[key].label)
        self.start_src.data = {"x": [r.X0[TRACKED, 0]],
                               "y": [r.X0[TRACKED, 1] if r.X0.shape[1] > 1 else 0.0]}
        fit_log_axis(self.gap_fig, curves)
        t_lo = min((float(c.x[0]) for c in curves if len(c.x)), default=0.1)
        self.gap_fig.x_range.update(start=t_lo, end=r.horizon)
        self.gap_fig.xaxis.ticker = decade_ticker(10.0 ** math.floor(math.log10(t_lo)),
                                                  10.0 ** math.ceil(math.log10(r.horizon)))
        # the bowl's curvatures along x₁, x₂ (the kernel's diagonal, in the plot's order)
        diagonal = np.allclose(r.A, np.diag(np.diag(r.A)))
        a = ", ".join(f"{v:.3g}" for v in (np.diag(r.A) if diagonal else r.a))
        self.path_fig.title.text = (f"Path of token {TRACKED + 1} in the plane "
                                    f"({'a' if diagonal else 'eigenvalues of A'} = {a})")
        return _status(r)


def _status(r) -> str:
    """The status line of the momentum runs: where each ends, whether Nesterov leads and
    keeps under its bound, how close the runs are to their closed forms."""
    ends = ", ".join(f"{run.label} {run.suboptimality[-1]:.2e}" for run in r.runs.values())
    others = [k for k in ("gradient_flow", "heavy_ball") if k in r.runs]
    ahead = r.ahead_from("nesterov", others)
    names = " and ".join(r.runs[k].label for k in others)
    lead = (f"Nesterov is below the {names} from t = {ahead:.3g} on"
            if ahead is not None else f"Nesterov ends above the {names}")
    bound = {True: ", and under (r − 1)²|x₀|²/(2t²) at every frame",
             False: ", but crosses (r − 1)²|x₀|²/(2t²)", None: ""}[r.bound_holds]
    errors = [run.exact_error for run in r.runs.values() if run.exact_error is not None]
    exact = (f"; the runs meet their closed forms to {max(errors):.1e}" if errors else "")
    return (f"f − f* at t = {r.horizon:g}: {ends}. {lead}{bound}{exact} "
            f"(RK4, dt = {r.dt:g}).")
