"""Inertial attention lab: blow-up, momentum, clouds and effective depth (MODEL.md §10-§13).

A thin view over :mod:`dynamics.inertial`: the "Run" button computes whole
trajectories on demand (no streaming) and refills the ColumnDataSources.
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

from dynamics.inertial import (
    CLOUDS,
    Damping,
    InertialEngine,
    accelerated_trajectory,
    first_order_blowup_time,
    initial_cloud,
    integrate_until_blowup,
    layer_crossing,
    linear_velocity,
    matrix_hamiltonian,
    model_matrices,
    moment_trajectory,
    parse_diagonal,
    second_moment,
)
from dynamics.inertial.linear import largest_eigenvalue
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


def _finite(x, y, positive=False):
    """Keep the points where both coordinates are finite (and ``y > 0`` on log axes)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if positive:
        keep &= y > 0
    return x[keep], y[keep]


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
                          for k in ("continuous", "euler", "kick_damp_drift")}
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
        self.soft_src = {k: ColumnDataSource({"t": [], "s": []})
                         for k in ("softmax_inertial", "softmax_momentum",
                                   "softmax_first_order")}
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
            d = s.dim
            a = parse_diagonal(self.kernel_input.value, d, "A diagonal")
            v = parse_diagonal(self.value_input.value, d, "V diagonal")
            s.param.update(kernel_diag=self.kernel_input.value,
                           value_diag=self.value_input.value)
            rng = np.random.default_rng(s.seed)
            A, V = model_matrices(a, v, d, s.matrix_draw, rng)
            X0 = initial_cloud(s.cloud, s.n_tokens, d, s.second_moment, rng)
        except ValueError as exc:
            self._error(str(exc))
            return False
        self.message.visible = False
        damping = Damping.from_settings(s)
        S0 = second_moment(X0)
        t_first = first_order_blowup_time(a, v, np.full(d, s.second_moment))
        fast = dict(rtol=1e-8, atol=1e-10)
        acc = accelerated_trajectory(A, V, S0, np.zeros((d, d)), damping, 40.0,
                                     threshold=1e8, **fast)
        t_acc = acc.blowup_time
        horizon = min(40.0, 1.2 * max(t for t in (t_first, t_acc, 1.0) if np.isfinite(t)))
        t_eval = np.linspace(0, horizon, 300)
        first = moment_trajectory(S0, A, V, horizon, t_eval=t_eval, threshold=1e8, **fast)
        acc = accelerated_trajectory(A, V, S0, np.zeros((d, d)), damping, horizon,
                                     t_eval=t_eval, threshold=1e8, **fast)
        self._eigen(self.eig_first, first)
        self._eigen(self.eig_acc, acc)
        _place(self.tmax_marker, t_first, f"first-order T_max = {t_first:.3f}")
        _place(self.tacc_marker, t_acc, f"accelerated blow-up {t_acc:.3f}")
        self._clouds(X0, A, V, t_first, horizon)
        crossing = self._layers(X0, A, V, damping, acc)
        hx, hy = _finite(acc.t, [matrix_hamiltonian(Sk, Pk, A, V)
                                 for Sk, Pk in zip(acc.S, acc.P, strict=True)])
        self.ham_src.data = {"t": hx[: len(hx) - 1] if len(hx) > 1 else hx,
                             "H": hy[: len(hy) - 1] if len(hy) > 1 else hy}
        soft_note = self._softmax()
        fmt = lambda t: f"{t:.3f}" if np.isfinite(t) else "∞ (none)"  # noqa: E731
        self.status.object = (
            f"first-order T_max = {fmt(t_first)}; accelerated blow-up at t = {fmt(t_acc)}; "
            f"θ = {s.theta:g} first crossed at layer {crossing.layer} "
            f"(predicted {crossing.predicted}){soft_note}")
        return True

    def _eigen(self, source, traj):
        lam = np.linalg.eigvalsh(traj.S) if len(traj.S) else np.zeros((0, 1))
        xs, ys = [], []
        for k in range(lam.shape[1]):
            x, y = _finite(traj.t, lam[:, k], positive=True)
            xs.append(x)
            ys.append(y)
        source.data = {"xs": xs, "ys": ys, "color": COLORS[: len(xs)] * 1
                       if len(xs) <= len(COLORS) else [COLORS[0]] * len(xs)}

    def _clouds(self, X0, A, V, t_first, horizon):
        s = self.settings
        n, d = X0.shape

        def cols(X):
            return {"x": X[:, 0], "y": X[:, 1] if d > 1 else np.zeros(n)}

        def flow(X):
            return lambda t, y: linear_velocity(y.reshape(n, d), A, V).ravel()

        t_show = 0.9 * t_first if np.isfinite(t_first) else horizon
        res = integrate_until_blowup(flow(X0), X0.ravel(), t_show,
                                     lambda y: largest_eigenvalue(second_moment(y.reshape(n, d))),
                                     1e8, rtol=1e-8, atol=1e-10)
        X1 = res.y[-1].reshape(n, d)
        self.cloud0.data = cols(X0)
        self.cloud1.data = cols(X1) if np.all(np.isfinite(X1)) else cols(X0)
        t_eval = np.linspace(0, horizon, 150)
        for kind, src in self.clouds_cmp.items():
            Xk = initial_cloud(kind, n, d, second_moment(X0), np.random.default_rng(s.seed + 1))
            r = integrate_until_blowup(
                flow(Xk), Xk.ravel(), horizon,
                lambda y: largest_eigenvalue(second_moment(y.reshape(n, d))), 1e8,
                t_eval=t_eval, rtol=1e-8, atol=1e-10)
            lam = [largest_eigenvalue(second_moment(y.reshape(n, d))) for y in r.y]
            t, lam = _finite(r.t, lam, positive=True)
            src.data = {"t": t, "s": lam}

    def _layers(self, X0, A, V, damping, acc):
        s = self.settings
        h = s.layer_h
        out = {}
        for scheme in ("euler", "kick_damp_drift"):
            out[scheme] = layer_crossing(X0, A, V, h, s.theta, scheme=scheme,
                                         damping=damping, t_max=40.0)
            lx, ly = _finite(np.arange(len(out[scheme].moments)), out[scheme].moments,
                             positive=True)
            self.layer_src[scheme].data = {"l": lx, "s": ly}
        c = out["kick_damp_drift"]
        lam = np.linalg.eigvalsh(acc.S)[:, -1] if len(acc.S) else np.zeros(0)
        n_show = len(c.moments)
        keep = acc.t / h <= n_show
        cx, cy = _finite(acc.t[keep] / h, lam[keep], positive=True)
        self.layer_src["continuous"].data = {"l": cx, "s": cy}
        self.theta_line.location = float(s.theta)
        _place(self.pred_marker, c.predicted, f"predicted ⌈T_θ/h⌉ = {c.predicted}")
        _place(self.actual_marker, c.layer, f"first crossing = {c.layer}")
        return c

    def _softmax(self) -> str:
        s = self.settings
        notes = []
        for model, src in self.soft_src.items():
            try:
                eng = InertialEngine(s.copy(model=model, norm_limit=1e6))
            except ValueError as exc:
                src.data = {"t": [], "s": []}
                notes.append(f"{model}: {exc}")
                continue
            ts, ss = [0.0], [eng.frame().diagnostics["second_moment_max"]]
            for _ in range(60):
                eng.advance(5)
                d = eng.frame().diagnostics
                ts.append(d["t"])
                ss.append(d["second_moment_max"])
                if eng.status != "running":
                    break
            t, lam = _finite(ts, ss, positive=True)
            src.data = {"t": t, "s": lam}
        return ("; " + "; ".join(notes)) if notes else ""

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
