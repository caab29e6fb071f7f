"""The time series' plots of the KL lag and of the energy balance, built for
:class:`app.mainview.timeseries.TimeSeries` (Theory page: tracking the moving softmax,
energy balance)."""

from __future__ import annotations

from bokeh.models import CDSView, CustomJSFilter, LinearAxis, Range1d
from bokeh.palettes import Category10_10 as C

from .plots import legend_below, time_figure
from .ranges import LOG_FLOOR

#: The energy plot's title (short enough for the narrow layout's plot width, 1024 px).
ENERGY_TITLE = "Energy balance (residual 0 ⇔ dissipation law)"
#: Lines of the energy plot drawn on its right-hand axis: the kinetic energy (≈ 18
#: against H − H(0) of ±5 by default, 5,000 for a real head) would flatten the balance
#: H − H(0), −dissipated and the residual on a shared axis.
RIGHT_AXIS = ("momentum",)
#: The right-hand axis's labels (in its line's colour; short: a projector's type fits).
KINETIC_AXIS, MOMENTUM_AXIS = "kinetic energy K", "momentum term"


def above_floor(column: str) -> CDSView:
    """The rows of ``column`` above :data:`LOG_FLOOR`: a lag of 0 (a run that starts at
    A = A*, a bound of 0 before the features move) is stored at the floor, and a log
    axis's line drawn through it fell from the curve to the axis's foot; it is left out
    (the line starts at the first lag above the floor, as a log axis can show)."""
    return CDSView(filter=CustomJSFilter(code=f"""
      const v = source.data["{column}"], keep = [];
      for (let i = 0; i < v.length; i++) {{ if (v[i] > {LOG_FLOOR!r}) keep.push(i); }}
      return keep;"""))


def kl_figures(src, lines: dict):
    """The lag's plots, on a linear and a logarithmic axis (their lines put in ``lines``;
    the log axis's without the rows at the floor: :func:`above_floor`)."""
    figs = (time_figure("Attention lag Σᵢ KL(Aᵢ‖A*ᵢ)", "KL (nats)"),
            time_figure("Attention lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)", "KL (nats)",
                        y_axis_type="log"))
    for fig, suffix in zip(figs, ("", "_log"), strict=True):
        views = ({"view": above_floor("kl_log")}, {"view": above_floor("kl_bound_log")}
                 ) if suffix else ({}, {})
        lines["kl" + suffix] = fig.line(
            "t", "kl" + suffix, source=src, color=C[0], line_width=2,
            legend_label="Σ KL(Aᵢ‖A*ᵢ)", **views[0])
        lines["kl_bound" + suffix] = fig.line(
            "t", "kl_bound" + suffix, source=src, color=C[3], line_dash="dashed",
            line_width=2, legend_label="tracking bound Σ Bᵢ²/8", **views[1])
        legend_below(fig, ncols=2, label_width=100)
    return figs


def energy_figure(src, lines: dict):
    """The energy balance's plot and its right-hand axis (its lines put in ``lines``)."""
    fig, right_axis = time_figure(ENERGY_TITLE, "energy (score units)", height=300), None
    for key, label, color, dash in (
        ("d_energy", "H(t) − H(0)", C[0], "solid"),
        ("budget", "work − dissipated", C[1], "dashed"),
        ("d_potential", "Φ(t) − Φ(0)", C[2], "dotted"),
        ("dissipated", "dissipated ∫D dt", C[4], "solid"),
        ("residual", "residual H−H(0)+∫D−W", C[3], "solid"),
        ("momentum", "kinetic energy K(t)", C[6], "dotdash"),
    ):
        right = {"y_range_name": "right"} if key in RIGHT_AXIS else {}
        if right and "right" not in fig.extra_y_ranges:
            fig.extra_y_ranges = {"right": Range1d(0, 1)}
            right_axis = LinearAxis(
                y_range_name="right", axis_label=KINETIC_AXIS, axis_label_text_color=color,
                major_label_text_color=color)
            fig.add_layout(right_axis, "right")
        lines[key] = fig.line("t", key, source=src, color=color, line_dash=dash, line_width=2,
                              legend_label=label, **right)
    legend_below(fig, ncols=2, label_width=100)
    return fig, right_axis
