"""The six attention plots of the inertial lab: eigenvalues of ``S(t)`` with the
first-order ``T_max`` and the accelerated blow-up, the token cloud, three clouds with
the same ``S(0)``, the layer-by-layer second moment, the Hamiltonian and the softmax
models, filled from a :class:`~dynamics.inertial.experiments.LabResult`."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, Range1d, Span
from bokeh.plotting import figure

from app.mainview.plots import legend_below
from dynamics.inertial import CLOUDS
from dynamics.inertial.experiments import LAYER_SCHEMES, SOFTMAX_MODELS

from .plotting import (
    COLORS,
    FIGURE_OPTIONS,
    fit_log_axis,
    log_figure,
    place_markers,
    vspan,
    x_end,
)

#: Smallest span of the Hamiltonian's axis, relative to the largest ``|H|`` drawn.
HAM_SPAN = 0.02


def _lines(curves) -> dict:
    """The data of a ``multi_line`` source: one line per curve."""
    return {"xs": [c.x for c in curves], "ys": [c.y for c in curves]}


def _points(X) -> dict:
    """The first two coordinates of the tokens ``X`` (N, d) (``y = 0`` when ``d = 1``)."""
    return {"x": X[:, 0], "y": X[:, 1] if X.shape[1] > 1 else np.zeros(X.shape[0])}


def ham_range(values, min_span: float) -> tuple[float, float]:
    """Ends of a linear axis showing ``values`` with a margin of 5 %: at least
    ``min_span`` times the largest ``|value|`` wide (a conserved ``H`` is drawn flat, not
    at the scale of the solver's last digits); (0, 1) without finite values.

    The ranges are set here, not left to BokehJS (a ``DataRange1d``): a figure first
    drawn while hidden kept an empty frame without axes once shown."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    span = max(hi - lo, min_span * float(np.abs(v).max()), 1e-12)
    mid = 0.5 * (lo + hi)
    return mid - 0.55 * span, mid + 0.55 * span


def _when(t) -> str:
    return f"{t:.3f}" if np.isfinite(t) else "∞ (none)"


#: The clouds' names in the legend (the settings' values have underscores).
CLOUD_NAMES = {"gaussian": "Gaussian", "student_t": "Student-t",
               "uniform_ellipsoid": "uniform ellipsoid"}


class AttentionPlots:
    """The figures of the attention experiments, their sources and markers.

    Attributes
    ----------
    eig_fig, cloud_fig, clouds_fig, layer_fig, ham_fig, soft_fig : bokeh.plotting.figure
        The six plots.
    figures : tuple
        The same, in the order ``eig, cloud, layer, clouds, ham, soft`` (the page's).
    """

    def __init__(self):
        self._eigenvalues()
        g = figure(title="Token cloud (first two coordinates)", x_axis_label="x₁",
                   y_axis_label="x₂", match_aspect=True, **FIGURE_OPTIONS)
        self.cloud0 = ColumnDataSource({"x": [], "y": []})
        self.cloud1 = ColumnDataSource({"x": [], "y": []})
        g.scatter("x", "y", source=self.cloud0, size=7, color="gray", legend_label="t = 0")
        g.scatter("x", "y", source=self.cloud1, size=7, color=COLORS[1],
                  legend_label="first order, later time")
        legend_below(g, ncols=2, label_width=60)
        self.cloud_fig = g

        c = log_figure("λₘₐₓ(S(t)): three clouds with the same S(0)", "time t", "λₘₐₓ(S)")
        self.clouds_cmp = {k: ColumnDataSource({"t": [], "s": []}) for k in CLOUDS}
        for i, k in enumerate(CLOUDS):
            c.line("t", "s", source=self.clouds_cmp[k], color=COLORS[i], line_width=2,
                   line_dash=["solid", "dashed", "dotted"][i], legend_label=CLOUD_NAMES[k])
        legend_below(c, ncols=3, label_width=60)
        self.clouds_fig = c

        self._layers()
        h = figure(title="Hamiltonian H(S, P), accelerated", x_range=Range1d(0.0, 1.0),
                   y_range=Range1d(0.0, 1.0), x_axis_label="time t", y_axis_label="H(S, P)",
                   **FIGURE_OPTIONS)
        self.ham_src = ColumnDataSource({"t": [], "H": []})
        h.line("t", "H", source=self.ham_src, line_width=2)
        self.ham_fig = h

        s = log_figure("Softmax: inertial vs momentum-only", "time t", "λₘₐₓ(S)")
        self.soft_src = {k: ColumnDataSource({"t": [], "s": []}) for k in SOFTMAX_MODELS}
        for i, k in enumerate(self.soft_src):
            s.line("t", "s", source=self.soft_src[k], color=COLORS[i + 3], line_width=2,
                   legend_label=k.replace("softmax_", "").replace("_", " "))
        legend_below(s, ncols=3, label_width=76)  # "first order" clear of "momentum"
        self.soft_fig = s
        self.figures = (self.eig_fig, self.cloud_fig, self.layer_fig, self.clouds_fig,
                        self.ham_fig, self.soft_fig)

    def _eigenvalues(self) -> None:
        """The eigenvalues of ``S(t)``, first order and accelerated, with their times."""
        f = log_figure("Eigenvalues of S(t) (one line each)", "time t", "eigenvalue of S(t)")
        self.eig_first = ColumnDataSource({"xs": [], "ys": []})
        self.eig_acc = ColumnDataSource({"xs": [], "ys": []})
        f.multi_line("xs", "ys", source=self.eig_first, line_color=COLORS[0], line_width=2,
                     legend_label="first order")
        f.multi_line("xs", "ys", source=self.eig_acc, line_color=COLORS[1], line_width=2,
                     line_dash="dashed", legend_label="accelerated")
        legend_below(f, ncols=2, label_width=60)
        self.tmax_marker = vspan(f, "Tₘₐₓ", row=0, color=COLORS[0])
        self.tacc_marker = vspan(f, "blow-up", row=1, color=COLORS[1])
        self.eig_fig = f

    def _layers(self) -> None:
        """The layer-by-layer second moment, the threshold θ and its layers."""
        lay = log_figure("Layer-by-layer second moment (accelerated, P(0) = 0)",
                         "layer l (depth l·h)", "λₘₐₓ(Sₗ)")
        self.layer_src = {k: ColumnDataSource({"l": [], "s": []})
                          for k in ("continuous", *LAYER_SCHEMES)}
        lay.line("l", "s", source=self.layer_src["continuous"], color="black",
                 line_width=2, legend_label="continuous, t/h")
        lay.scatter("l", "s", source=self.layer_src["euler"], color=COLORS[0], size=5,
                    legend_label="explicit Euler")
        lay.scatter("l", "s", source=self.layer_src["kick_damp_drift"], color=COLORS[1],
                    size=5, marker="triangle", legend_label="kick-damp-drift")
        legend_below(lay, ncols=2, label_width=90)  # three columns are clipped at 1024 px
        self.theta_line = Span(location=1, dimension="width", line_color="gray",
                               line_dash="dotted")
        lay.add_layout(self.theta_line)
        self.pred_marker = vspan(lay, "⌈T_θ/h⌉", row=0)
        self.actual_marker = vspan(lay, "crossing", row=1, color=COLORS[1])
        self.layer_fig = lay

    @property
    def sources(self) -> list:
        """Every data source of the plots."""
        return [self.eig_first, self.eig_acc, self.cloud0, self.cloud1, self.ham_src,
                *self.clouds_cmp.values(), *self.layer_src.values(), *self.soft_src.values()]

    def show(self, r) -> str:
        """Map the fields of a :class:`~dynamics.inertial.experiments.LabResult` into the
        sources and markers; returns the status line."""
        eigenvalues = (*r.first_order_eigenvalues, *r.accelerated_eigenvalues)
        self.eig_first.data = _lines(r.first_order_eigenvalues)
        self.eig_acc.data = _lines(r.accelerated_eigenvalues)
        place_markers(((self.tmax_marker, r.first_order_time,
                        f"Tₘₐₓ = {r.first_order_time:.3f}"),
                       (self.tacc_marker, r.accelerated_time,
                        f"blow-up {r.accelerated_time:.3f}")),
                      x_end(eigenvalues))
        self.cloud0.data = _points(r.data.X0)
        self.cloud1.data = _points(r.later_cloud)
        for kind, src in self.clouds_cmp.items():
            src.data = {"t": r.cloud_moments[kind].x, "s": r.cloud_moments[kind].y}
        for scheme, src in self.layer_src.items():
            src.data = {"l": r.layers[scheme].x, "s": r.layers[scheme].y}
        self.theta_line.location = r.theta
        place_markers(((self.pred_marker, r.predicted_layer,
                        f"⌈T_θ/h⌉ = {r.predicted_layer}"),
                       (self.actual_marker, r.crossing_layer,
                        f"crossing {r.crossing_layer}")),
                      x_end(r.layers.values()))
        self.ham_src.data = {"t": r.hamiltonian.x, "H": r.hamiltonian.y}
        for axis, values, span in ((self.ham_fig.x_range, r.hamiltonian.x, 0.0),
                                   (self.ham_fig.y_range, r.hamiltonian.y, HAM_SPAN)):
            start, end = ham_range(values, span)
            axis.update(start=start, end=end)
        for model, src in self.soft_src.items():
            src.data = {"t": r.softmax[model].x, "s": r.softmax[model].y}
        fit_log_axis(self.eig_fig, eigenvalues)
        fit_log_axis(self.clouds_fig, r.cloud_moments.values())
        fit_log_axis(self.layer_fig, r.layers.values(), (r.theta,))
        fit_log_axis(self.soft_fig, r.softmax.values())
        crossing = (f"first crossed at layer {r.crossing_layer} (predicted "
                    f"{r.predicted_layer if r.predicted_layer is not None else 'none'})"
                    if r.crossing_layer is not None else "not crossed")
        how = " (numerical)" if r.data.a is None else ""
        return (f"first-order Tₘₐₓ = {_when(r.first_order_time)}{how}; accelerated blow-up "
                f"at t = {_when(r.accelerated_time)}; θ = {r.theta:g} {crossing}")
