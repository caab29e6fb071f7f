"""Inertial attention lab: blow-up, momentum, clouds and effective depth (Theory page, Part II).

A view only: the "Run" button calls :func:`dynamics.inertial.experiments.run_lab_experiment`
(whole trajectories, computed on demand, no streaming) and maps the fields of its
:class:`~dynamics.inertial.experiments.LabResult` into the ColumnDataSources.
"""

from __future__ import annotations

import json
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Label, Span
from bokeh.plotting import figure

from dynamics.inertial import CLOUDS
from dynamics.inertial.experiments import LAYER_SCHEMES, SOFTMAX_MODELS, run_lab_experiment
from dynamics.settings import Settings

from .resources import asset

#: The presets of the lab (``assets/presets/inertial.json``, see :mod:`app.resources`).
PRESETS_PATH = asset("presets", "inertial.json")
CONTROLS = ["matrix_draw", "damping", "alpha", "nesterov_r", "nesterov_t0", "layer_h",
            "theta", "cloud", "second_moment", "n_tokens", "dim", "seed", "dt"]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def load_presets(path: str | Traversable = PRESETS_PATH) -> tuple[list[dict], list[str]]:
    """Presets whose settings are valid :class:`Settings`, and messages for the others."""
    if isinstance(path, str):
        path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [], [f"cannot read presets {path}: {exc}"]
    good, errors = [], []
    names = set(Settings.names())
    for i, p in enumerate(raw if isinstance(raw, list) else []):
        try:
            unknown = set(p["settings"]) - names
            if unknown:
                raise ValueError(f"unknown settings {sorted(unknown)}")
            Settings(**p["settings"])
            good.append({"name": str(p["name"]), "caption": str(p.get("caption", "")),
                         "settings": dict(p["settings"])})
        except (KeyError, TypeError, ValueError) as exc:
            errors.append(f"preset {i} ({p.get('name', '?') if isinstance(p, dict) else p}): "
                          f"{exc}")
    return good, errors


def _lines(curves) -> dict:
    """The data of a ``multi_line`` source: one line (and color) per curve."""
    xs, ys = [c.x for c in curves], [c.y for c in curves]
    colors = COLORS[: len(xs)] if len(xs) <= len(COLORS) else [COLORS[0]] * len(xs)
    return {"xs": xs, "ys": ys, "color": colors}


def _points(X) -> dict:
    """The first two coordinates of the tokens ``X`` (N, d) (``y = 0`` when ``d = 1``)."""
    return {"x": X[:, 0], "y": X[:, 1] if X.shape[1] > 1 else np.zeros(X.shape[0])}


def _when(t) -> str:
    return f"{t:.3f}" if np.isfinite(t) else "∞ (none)"


def _vspan(fig, text):
    span = Span(location=0, dimension="height", line_dash="dashed", line_width=2,
                visible=False)
    label = Label(x=0, y=10, y_units="screen", text=text, visible=False,
                  text_font_size="10pt")
    fig.add_layout(span)
    fig.add_layout(label)
    return span, label


def _place(marker, location, text=None):
    span, label = marker
    ok = location is not None and np.isfinite(location)
    span.visible = label.visible = bool(ok)
    if ok:
        span.location = label.x = float(location)
        if text is not None:
            label.text = text


class InertialLab(pn.viewable.Viewer):
    """The Part II tab: controls, five plots and a status line."""

    preset = param.Selector(default=None, objects=[None], allow_None=True,
                            doc="Preset to load.")

    def __init__(self, **params):
        self.settings = Settings(model="linear_accelerated", n_tokens=16, dim=2)
        super().__init__(**params)
        self.presets, preset_errors = load_presets()
        self.param.preset.objects = [None] + [p["name"] for p in self.presets]
        self.kernel_input = pn.widgets.TextInput(label="A diagonal (kernel_diag)",
                                                 value=self.settings.kernel_diag)
        self.value_input = pn.widgets.TextInput(label="V diagonal (value_diag)",
                                                value=self.settings.value_diag)
        self.run_button = pn.widgets.Button(label="Run", color="primary")
        self.run_button.on_click(lambda event: self.run())
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.caption = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.message = pn.pane.Alert("; ".join(preset_errors), alert_type="warning",
                                     visible=bool(preset_errors))
        self._build_figures()
        self.param.watch(self._load_preset, "preset")

    # ------------------------------------------------------------------ figures
    def _build_figures(self):
        opts = dict(height=300, sizing_mode="stretch_width", tools="pan,wheel_zoom,reset,save")
        f = figure(title="Eigenvalues of S(t)", y_axis_type="log", x_axis_label="time t",
                   y_axis_label="eigenvalue of S(t)", **opts)
        self.eig_first = ColumnDataSource({"xs": [], "ys": [], "color": []})
        self.eig_acc = ColumnDataSource({"xs": [], "ys": [], "color": []})
        f.multi_line("xs", "ys", source=self.eig_first, line_color="color", line_width=2,
                     legend_label="first order")
        f.multi_line("xs", "ys", source=self.eig_acc, line_color="color", line_width=2,
                     line_dash="dashed", legend_label="accelerated")
        f.legend.location = "top_left"
        self.tmax_marker = _vspan(f, "first-order T_max")
        self.tacc_marker = _vspan(f, "accelerated blow-up")
        self.eig_fig = f

        g = figure(title="Token cloud (first two coordinates)", x_axis_label="x₁",
                   y_axis_label="x₂", match_aspect=True, **opts)
        self.cloud0 = ColumnDataSource({"x": [], "y": []})
        self.cloud1 = ColumnDataSource({"x": [], "y": []})
        g.scatter("x", "y", source=self.cloud0, size=7, color="gray", legend_label="t = 0")
        g.scatter("x", "y", source=self.cloud1, size=7, color=COLORS[1],
                  legend_label="first order, later time")
        self.cloud_fig = g

        c = figure(title="λ_max(S(t)) of particle flows, three clouds with the same S(0)",
                   y_axis_type="log", x_axis_label="time t", y_axis_label="λ_max(S)", **opts)
        self.clouds_cmp = {k: ColumnDataSource({"t": [], "s": []}) for k in CLOUDS}
        for i, k in enumerate(CLOUDS):
            c.line("t", "s", source=self.clouds_cmp[k], color=COLORS[i], line_width=2,
                   line_dash=["solid", "dashed", "dotted"][i], legend_label=k)
        c.legend.location = "top_left"
        self.clouds_fig = c

        lay = figure(title="Layer-by-layer second moment (accelerated, P(0) = 0)",
                     y_axis_type="log", x_axis_label="layer l (depth l·h)",
                     y_axis_label="λ_max(S_l)", **opts)
        self.layer_src = {k: ColumnDataSource({"l": [], "s": []})
                          for k in ("continuous", *LAYER_SCHEMES)}
        lay.line("l", "s", source=self.layer_src["continuous"], color="black",
                 line_width=2, legend_label="continuous, t/h")
        lay.scatter("l", "s", source=self.layer_src["euler"], color=COLORS[0], size=5,
                    legend_label="explicit Euler")
        lay.scatter("l", "s", source=self.layer_src["kick_damp_drift"], color=COLORS[1],
                    size=5, marker="triangle", legend_label="kick-damp-drift")
        lay.legend.location = "top_left"
        self.theta_line = Span(location=1, dimension="width", line_color="gray",
                               line_dash="dotted")
        lay.add_layout(self.theta_line)
        self.pred_marker = _vspan(lay, "predicted ⌈T_θ/h⌉")
        self.actual_marker = _vspan(lay, "first crossing")
        self.layer_fig = lay

        h = figure(title="Hamiltonian of the accelerated moment system",
                   x_axis_label="time t", y_axis_label="H(S, P)", **opts)
        self.ham_src = ColumnDataSource({"t": [], "H": []})
        h.line("t", "H", source=self.ham_src, line_width=2)
        self.ham_fig = h

        s = figure(title="Softmax: inertial vs momentum-only", y_axis_type="log",
                   x_axis_label="time t", y_axis_label="λ_max(S)", **opts)
        self.soft_src = {k: ColumnDataSource({"t": [], "s": []}) for k in SOFTMAX_MODELS}
        for i, k in enumerate(self.soft_src):
            s.line("t", "s", source=self.soft_src[k], color=COLORS[i + 3], line_width=2,
                   legend_label=k.replace("softmax_", ""))
        s.legend.location = "top_left"
        self.soft_fig = s

    # ------------------------------------------------------------------ actions
    def _load_preset(self, event):
        p = next((p for p in self.presets if p["name"] == event.new), None)
        if p is None:
            return
        try:
            self.settings.param.update(**p["settings"])
        except ValueError as exc:
            self._error(f"preset {p['name']!r}: {exc}")
            return
        self.kernel_input.value = self.settings.kernel_diag
        self.value_input.value = self.settings.value_diag
        self.caption.object = f"**{p['name']}** — {p['caption']}"
        self.run()

    def _error(self, text):
        self.message.object, self.message.alert_type, self.message.visible = text, "danger", True

    def run(self) -> bool:
        """Recompute every plot; ``False`` (and a message) on bad input."""
        s = self.settings
        try:
            r = run_lab_experiment(s, kernel_diag=self.kernel_input.value,
                                   value_diag=self.value_input.value)
        except ValueError as exc:
            self._error(str(exc))
            return False
        s.param.update(kernel_diag=r.settings["kernel_diag"],
                       value_diag=r.settings["value_diag"])
        self.message.visible = False
        self._show(r)
        return True

    def _show(self, r) -> None:
        """Map the fields of a :class:`~dynamics.inertial.experiments.LabResult` into the
        sources, markers and status line."""
        self.eig_first.data = _lines(r.first_order_eigenvalues)
        self.eig_acc.data = _lines(r.accelerated_eigenvalues)
        _place(self.tmax_marker, r.first_order_time,
               f"first-order T_max = {r.first_order_time:.3f}")
        _place(self.tacc_marker, r.accelerated_time,
               f"accelerated blow-up {r.accelerated_time:.3f}")
        self.cloud0.data = _points(r.data.X0)
        self.cloud1.data = _points(r.later_cloud)
        for kind, src in self.clouds_cmp.items():
            src.data = {"t": r.cloud_moments[kind].x, "s": r.cloud_moments[kind].y}
        for scheme, src in self.layer_src.items():
            src.data = {"l": r.layers[scheme].x, "s": r.layers[scheme].y}
        self.theta_line.location = r.theta
        _place(self.pred_marker, r.predicted_layer, f"predicted ⌈T_θ/h⌉ = {r.predicted_layer}")
        _place(self.actual_marker, r.crossing_layer, f"first crossing = {r.crossing_layer}")
        self.ham_src.data = {"t": r.hamiltonian.x, "H": r.hamiltonian.y}
        for model, src in self.soft_src.items():
            src.data = {"t": r.softmax[model].x, "s": r.softmax[model].y}
        notes = "".join(f"; {m}" for m in r.messages)
        self.status.object = (
            f"first-order T_max = {_when(r.first_order_time)}; accelerated blow-up at "
            f"t = {_when(r.accelerated_time)}; θ = {r.theta:g} first crossed at layer "
            f"{r.crossing_layer} (predicted {r.predicted_layer}){notes}")

    # ------------------------------------------------------------------ layout
    def __panel__(self):
        controls = pn.Column(
            pn.widgets.Select.from_param(self.param.preset, label="Preset"),
            self.kernel_input, self.value_input,
            pn.Param(self.settings, parameters=CONTROLS, show_name=False),
            self.run_button, width=320)
        plots = pn.Column(
            self.status, self.caption, self.message,
            pn.Row(pn.pane.Bokeh(self.eig_fig), pn.pane.Bokeh(self.cloud_fig)),
            pn.Row(pn.pane.Bokeh(self.layer_fig), pn.pane.Bokeh(self.clouds_fig)),
            pn.Row(pn.pane.Bokeh(self.ham_fig), pn.pane.Bokeh(self.soft_fig)),
            sizing_mode="stretch_width")
        return pn.Row(controls, plots, sizing_mode="stretch_width")
