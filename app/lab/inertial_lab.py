"""Inertial attention lab: momentum on a quadratic, blow-up, clouds and effective depth
(Theory page, Part II).

A view only: the "Run" button (and choosing a preset, the first one running when the lab
opens, or uploading a weights file whose ``X``, ``A``, ``V``, ``P`` the runs then start from)
calls :func:`dynamics.inertial.experiments.run_lab_experiment` (whole
trajectories, computed on demand, no streaming) and maps the fields of its
:class:`~dynamics.inertial.experiments.LabResult` into the ColumnDataSources. Settings
whose ``model`` is ``momentum_quadratic`` (the first preset, "Momentum on a quadratic")
run the base case instead, :func:`dynamics.inertial.momentum.run_momentum_experiment`:
``f − f*`` on log–log axes with the ``1/t²`` guide and the paths of one token in the
plane, in place of the attention plots (a weights file always runs the attention
experiments, from ``nesterov_t0`` = 1 if the base case had it at 0). Below the
plots, the equations of the Part II models from the registry, with links to their
sections of the Theory page (:func:`app.mainview.explain.models_text`).

Logarithmic axes span whole decades around the data (:func:`log_range`), so curves
equal up to rounding (``1 ± 2e-16``) are drawn as the one line they are; the labels of
the vertical markers of one plot sit on rows of their own, aligned away from the
plot's right edge (:func:`place_markers`).
"""

from __future__ import annotations

import json
import math
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import panel as pn
import param
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource, FixedTicker, Label, Range1d, Span
from bokeh.plotting import figure

from app.mainview.explain import models_text
from app.mainview.real_heads import clear_upload, read_upload
from app.mainview.timeseries import legend_below
from app.serving import katex
from app.serving.resources import asset, read_asset
from app.serving.server import locked
from dynamics.cli import WEIGHT_ARRAYS
from dynamics.inertial import CLOUDS
from dynamics.inertial.experiments import (
    LAYER_SCHEMES,
    SOFTMAX_MODELS,
    Curve,
    run_lab_experiment,
)
from dynamics.inertial.momentum import MOMENTUM_MODEL, RUNS, TRACKED, run_momentum_experiment
from dynamics.settings import Settings

#: The presets of the lab (``assets/presets/inertial.json``, see :mod:`app.serving.resources`).
PRESETS_PATH = asset("presets", "inertial.json")
CONTROLS = ["matrix_draw", "damping", "alpha", "nesterov_r", "nesterov_t0", "layer_h",
            "theta", "cloud", "second_moment", "n_tokens", "dim", "seed", "dt"]
#: Smallest span of the Hamiltonian's axis, relative to the largest ``|H|`` drawn.
HAM_SPAN = 0.02
#: The settings a file's data replace, restored when the lab leaves the file.
FILE_SETTINGS = ("n_tokens", "dim", "kernel_diag", "value_diag")
#: The controls of generated data a file makes void (greyed out while it is used; also
#: ``matrix_draw`` when the file has both ``A`` and ``V``).
FROM_FILE = ("n_tokens", "dim", "cloud", "second_moment")
#: What the upload says before a file is used.
UPLOAD_HELP = ("Your own data: a `.npz` file with `X` (N×d) and optionally `A`, `V` (d×d, "
               "symmetric, A positive definite) and `P` (N×d); the same file as "
               "`python -m dynamics run --weights FILE`.")
#: Shown above the plots while the controls differ from the run they show.
STALE = ("**The plots are stale:** a setting changed since they were computed. Press "
         "**Run** to update them.")
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
#: Colour and dash of each run of the momentum plots (:data:`dynamics.inertial.momentum.RUNS`).
RUN_STYLES = {"gradient_flow": ("#7f7f7f", "solid"), "heavy_ball": (COLORS[0], "dashdot"),
              "critical": (COLORS[2], "dashed"), "nesterov": (COLORS[1], "solid")}
#: The model of the attention experiments when a file leaves the momentum runs.
ATTENTION_MODEL = "linear_accelerated"
#: Controls the momentum runs do not read (greyed out while they are shown).
NOT_MOMENTUM = ("layer_h", "theta")


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


def _control(settings, name):
    """The widget of one setting, as :class:`panel.Param` would make it (a menu, or an
    integer or number slider), as wide as the controls."""
    p = settings.param[name]
    kind = (pn.widgets.Select if isinstance(p, param.Selector) else
            pn.widgets.IntSlider if isinstance(p, param.Integer) else pn.widgets.FloatSlider)
    return kind.from_param(p, sizing_mode="stretch_width")


def _lines(curves) -> dict:
    """The data of a ``multi_line`` source: one line per curve."""
    return {"xs": [c.x for c in curves], "ys": [c.y for c in curves]}


def log_range(values, extra=()) -> tuple[float, float]:
    """Ends of a logarithmic axis showing ``values``: the whole decades around them.

    Parameters
    ----------
    values : iterable of array_like
        The curves' y values (non-positive and non-finite ones are left out).
    extra : iterable of float
        More values to show (a threshold line).

    Returns
    -------
    (float, float)
        ``(10**a, 10**b)``, integers ``a < b``: at least one decade (two around data
        near a power of ten), so that curves equal up to rounding look like one line and
        the axis has tick labels; (0.1, 10) without data.
    """
    arrays = [np.asarray(v, dtype=float).ravel() for v in values]
    arrays.append(np.asarray(list(extra), dtype=float))
    data = np.concatenate(arrays) if arrays else np.empty(0)
    data = data[np.isfinite(data) & (data > 0)]
    if data.size == 0:
        return 0.1, 10.0
    # a twentieth of a decade of room: a curve on a power of ten is not on the frame
    lo = math.floor(math.log10(data.min()) - 0.05)
    hi = math.ceil(math.log10(data.max()) + 0.05)
    return 10.0**lo, 10.0**hi


def decade_ticker(start: float, end: float) -> FixedTicker:
    """Ticks at the powers of ten from ``start`` to ``end`` (minor ticks at 2…9 × them).

    BokehJS's log ticker falls back to linear ticks over a range of one or two decades,
    crowding their labels at its top and labelling nothing below 1.
    """
    lo, hi = round(math.log10(start)), round(math.log10(end))
    step = max(1, math.ceil((hi - lo) / 8))  # at most about 8 labels
    major = [10.0**k for k in range(lo, hi + 1, step)]
    minor = [m * 10.0**k for k in range(lo, hi) for m in range(2, 10)] if step == 1 else []
    return FixedTicker(ticks=major, minor_ticks=minor)


def _points(X) -> dict:
    """The first two coordinates of the tokens ``X`` (N, d) (``y = 0`` when ``d = 1``)."""
    return {"x": X[:, 0], "y": X[:, 1] if X.shape[1] > 1 else np.zeros(X.shape[0])}


def _when(t) -> str:
    return f"{t:.3f}" if np.isfinite(t) else "∞ (none)"


def _vspan(fig, text, row=0, color="black"):
    """A dashed vertical marker with its label (in its colour) on label row ``row``
    (counted from the bottom)."""
    span = Span(location=0, dimension="height", line_dash="dashed", line_width=2,
                line_color=color, visible=False)
    label = Label(x=0, y=8 + 20 * row, y_units="screen", text=text, visible=False,
                  text_font_size="10pt", text_color=color, background_fill_color="white",
                  background_fill_alpha=0.8)
    fig.add_layout(span)
    fig.add_layout(label)
    return span, label


def place_markers(placements, x_end) -> None:
    """Place the vertical markers of one plot and their labels.

    Parameters
    ----------
    placements : iterable of ``(marker, location, text)``
        A marker of :func:`_vspan` (hidden when ``location`` is None or not finite),
        its x and its label's text.
    x_end : float
        The largest x of the plot's data: a label right of half of it is drawn to the
        left of its marker, so that it is not cut off by the plot's right edge.
    """
    for (span, label), location, text in placements:
        ok = location is not None and bool(np.isfinite(location))
        span.visible = label.visible = ok
        if not ok:
            continue
        span.location = label.x = float(location)
        label.text = text
        right = np.isfinite(x_end) and location > 0.5 * x_end
        label.update(text_align="right" if right else "left", x_offset=-4 if right else 4)


def _x_end(curves) -> float:
    """The largest x of ``curves`` (``Curve`` objects; 0 without points)."""
    return max((float(np.max(c.x)) for c in curves if len(c.x)), default=0.0)


class InertialLab(pn.viewable.Viewer):
    """The Part II tab: controls, the momentum plots or the six attention plots, and a
    status line."""

    preset = param.Selector(default=None, objects=[None], allow_None=True,
                            doc="Preset to load.")

    def __init__(self, **params):
        self.settings = Settings(model="linear_accelerated", n_tokens=16, dim=2)
        super().__init__(**params)
        self.presets, preset_errors = load_presets()
        self.param.preset.objects = [None] + [p["name"] for p in self.presets]
        self.kernel_input = pn.widgets.TextInput(label="A diagonal (kernel_diag)",
                                                 value=self.settings.kernel_diag,
                                                 sizing_mode="stretch_width")
        self.value_input = pn.widgets.TextInput(label="V diagonal (value_diag)",
                                                value=self.settings.value_diag,
                                                sizing_mode="stretch_width")
        self.run_button = pn.widgets.Button(label="Run", color="primary")
        self.run_button.on_click(locked(lambda event: self.run()))
        #: The arrays of an uploaded file the runs start from (None: generated data), and
        #: the settings of the generated data they replaced (:data:`FILE_SETTINGS`).
        self.arrays, self._generated = None, None
        self.controls = {name: _control(self.settings, name)
                         for name in self.settings.param if name in CONTROLS}
        self.upload = pn.widgets.FileInput(accept=".npz", multiple=False,
                                           sizing_mode="stretch_width")
        self.upload.param.watch(locked(self._on_upload), "value")
        self.upload_note = pn.pane.Markdown(UPLOAD_HELP, sizing_mode="stretch_width",
                                            margin=(0, 10))
        self.generated_button = pn.widgets.Button(label="Back to generated data",
                                                  visible=False, sizing_mode="stretch_width")
        self.generated_button.on_click(locked(lambda event: self.use_generated_data()))
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.caption = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.message = pn.pane.Alert("; ".join(preset_errors), alert_type="warning",
                                     visible=bool(preset_errors))
        # the plots show the settings of the last run: said when the controls differ
        self.stale = pn.pane.Alert(STALE, alert_type="warning", visible=False,
                                   sizing_mode="stretch_width")
        self._ran = None  # the controls' values of the run shown
        self.settings.param.watch(self._check_stale, CONTROLS)
        for widget in (self.kernel_input, self.value_input):
            widget.param.watch(self._check_stale, "value")
        self._build_figures()
        self.attention_rows = [
            pn.Row(pn.pane.Bokeh(a), pn.pane.Bokeh(b), sizing_mode="stretch_width")
            for a, b in ((self.eig_fig, self.cloud_fig), (self.layer_fig, self.clouds_fig),
                         (self.ham_fig, self.soft_fig))]
        # the base case's two plots wrap in a narrow window (1024 px: no sideways scroll)
        self.momentum_row = pn.FlexBox(
            *(pn.pane.Bokeh(f, min_width=360, sizing_mode="stretch_width",
                            styles={"flex": "1 1 360px"}) for f in (self.gap_fig, self.path_fig)),
            flex_wrap="wrap", sizing_mode="stretch_width")
        self.explanation = pn.pane.LaTeX(
            models_text(part=2), renderer="katex", sizing_mode="stretch_width",
            css_classes=["explain"], stylesheets=[katex.STYLESHEET, read_asset("style.css")])
        katex.install_fonts()
        self.param.watch(self._load_preset, "preset")
        if self.presets and self.preset is None:  # the lab opens on its first preset, run
            self.preset = self.presets[0]["name"]

    # ------------------------------------------------------------------ figures
    def _build_figures(self):
        opts = dict(height=300, sizing_mode="stretch_width", min_width=300,
                    tools="pan,wheel_zoom,reset,save")
        opts_log = dict(y_axis_type="log", **opts)
        f = figure(title="Eigenvalues of S(t) (one line each)", x_axis_label="time t",
                   y_axis_label="eigenvalue of S(t)", y_range=Range1d(0.1, 10.0), **opts_log)
        self.eig_first = ColumnDataSource({"xs": [], "ys": []})
        self.eig_acc = ColumnDataSource({"xs": [], "ys": []})
        f.multi_line("xs", "ys", source=self.eig_first, line_color=COLORS[0], line_width=2,
                     legend_label="first order")
        f.multi_line("xs", "ys", source=self.eig_acc, line_color=COLORS[1], line_width=2,
                     line_dash="dashed", legend_label="accelerated")
        legend_below(f, ncols=2, label_width=60)
        self.tmax_marker = _vspan(f, "T_max", row=0, color=COLORS[0])
        self.tacc_marker = _vspan(f, "blow-up", row=1, color=COLORS[1])
        self.eig_fig = f

        g = figure(title="Token cloud (first two coordinates)", x_axis_label="x₁",
                   y_axis_label="x₂", match_aspect=True, **opts)
        self.cloud0 = ColumnDataSource({"x": [], "y": []})
        self.cloud1 = ColumnDataSource({"x": [], "y": []})
        g.scatter("x", "y", source=self.cloud0, size=7, color="gray", legend_label="t = 0")
        g.scatter("x", "y", source=self.cloud1, size=7, color=COLORS[1],
                  legend_label="first order, later time")
        legend_below(g, ncols=2, label_width=60)
        self.cloud_fig = g

        c = figure(title="λ_max(S(t)): three clouds with the same S(0)",
                   x_axis_label="time t", y_axis_label="λ_max(S)",
                   y_range=Range1d(0.1, 10.0), **opts_log)
        self.clouds_cmp = {k: ColumnDataSource({"t": [], "s": []}) for k in CLOUDS}
        for i, k in enumerate(CLOUDS):
            c.line("t", "s", source=self.clouds_cmp[k], color=COLORS[i], line_width=2,
                   line_dash=["solid", "dashed", "dotted"][i], legend_label=k)
        legend_below(c, ncols=3, label_width=60)
        self.clouds_fig = c

        lay = figure(title="Layer-by-layer second moment (accelerated, P(0) = 0)",
                     x_axis_label="layer l (depth l·h)", y_axis_label="λ_max(S_l)",
                     y_range=Range1d(0.1, 10.0), **opts_log)
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
        self.pred_marker = _vspan(lay, "⌈T_θ/h⌉", row=0)
        self.actual_marker = _vspan(lay, "crossing", row=1, color=COLORS[1])
        self.layer_fig = lay

        h = figure(title="Hamiltonian H(S, P), accelerated",
                   x_axis_label="time t", y_axis_label="H(S, P)", **opts)
        self.ham_src = ColumnDataSource({"t": [], "H": []})
        h.line("t", "H", source=self.ham_src, line_width=2)
        self.ham_fig = h

        s = figure(title="Softmax: inertial vs momentum-only", x_axis_label="time t",
                   y_axis_label="λ_max(S)", y_range=Range1d(0.1, 10.0), **opts_log)
        self.soft_src = {k: ColumnDataSource({"t": [], "s": []}) for k in SOFTMAX_MODELS}
        for i, k in enumerate(self.soft_src):
            s.line("t", "s", source=self.soft_src[k], color=COLORS[i + 3], line_width=2,
                   legend_label=k.replace("softmax_", ""))
        legend_below(s, ncols=3, label_width=76)  # "first_order" clear of "momentum"
        self.soft_fig = s
        self._build_momentum_figures(opts)
        self.figures = (self.gap_fig, self.path_fig, self.eig_fig, self.cloud_fig,
                        self.layer_fig, self.clouds_fig, self.ham_fig, self.soft_fig)

    def _build_momentum_figures(self, opts):
        """``f − f*`` (log–log, with the ``1/t²`` guide) and the paths of one token."""
        m = figure(title="Momentum on a quadratic: f − f*", x_axis_label="time t",
                   y_axis_label="f(x(t)) − f*", x_axis_type="log", y_axis_type="log",
                   x_range=Range1d(0.1, 100.0), y_range=Range1d(0.1, 10.0), **opts)
        self.gap_src = {k: ColumnDataSource({"t": [], "f": []}) for k in RUNS}
        self.gap_lines = {}
        for k, src in self.gap_src.items():
            color, dash = RUN_STYLES[k]
            self.gap_lines[k] = m.line("t", "f", source=src, color=color, line_dash=dash,
                                       line_width=2, legend_label=k.replace("_", " "))
        self.bound_src = ColumnDataSource({"t": [], "f": []})
        m.line("t", "f", source=self.bound_src, color="black", line_dash="dotted",
               line_width=2, legend_label="(r−1)²|x₀|²/(2t²)")
        legend_below(m, ncols=2, label_width=150)
        self.gap_fig = m

        p = figure(title=f"Path of token {TRACKED + 1} in the plane", x_axis_label="x₁",
                   y_axis_label="x₂", match_aspect=True, **opts)
        self.path_src = {k: ColumnDataSource({"x": [], "y": []}) for k in RUNS}
        self.path_lines = {}
        for k, src in self.path_src.items():
            color, dash = RUN_STYLES[k]
            self.path_lines[k] = p.line("x", "y", source=src, color=color, line_dash=dash,
                                        line_width=2, legend_label=k.replace("_", " "))
        self.start_src = ColumnDataSource({"x": [], "y": []})
        p.scatter("x", "y", source=self.start_src, size=9, color="black",
                  legend_label="start (at rest)")
        p.scatter([0.0], [0.0], size=12, marker="cross", color="black", line_width=2)
        legend_below(p, ncols=2, label_width=150)
        self.path_fig = p

    # ------------------------------------------------------------------ actions
    def _load_preset(self, event):
        p = next((p for p in self.presets if p["name"] == event.new), None)
        if p is None:
            return
        try:
            self.settings.copy(**p["settings"])
        except ValueError as exc:
            self._error(f"preset {p['name']!r}: {exc}")
            return
        self._forget_file()  # a preset is generated data
        self.settings.param.update(**p["settings"])
        self.kernel_input.value = self.settings.kernel_diag
        self.value_input.value = self.settings.value_diag
        self.caption.object = f"**{p['name']}** — {p['caption']}"
        self.run()

    def _controls_now(self) -> tuple:
        """The values of the lab's controls (what a run reads)."""
        return (tuple(getattr(self.settings, k) for k in CONTROLS),
                self.kernel_input.value, self.value_input.value)

    def _check_stale(self, *events) -> None:
        """Say that the plots are stale while the controls differ from the run shown."""
        self.stale.visible = self._ran is not None and self._controls_now() != self._ran

    def _error(self, text):
        self.message.object, self.message.alert_type, self.message.visible = text, "danger", True

    def run(self, arrays: dict | None = None) -> bool:
        """Recompute every plot; ``False`` (and a message) on bad input.

        ``arrays`` (the :class:`~dynamics.Simulation` keywords of a weights file) replace
        the data the runs start from; without them, the last file's data are used, if any
        (:attr:`arrays`). Refused arrays leave the plots, the settings and the data as
        they were.
        """
        return self._run(self.arrays if arrays is None else arrays,
                         kernel_diag=self.kernel_input.value, value_diag=self.value_input.value)

    @property
    def momentum(self) -> bool:
        """The lab shows the momentum runs (``model`` is ``momentum_quadratic``)."""
        return self.settings.model == MOMENTUM_MODEL

    def _run(self, arrays, **changes) -> bool:
        s = self.settings
        momentum = self.momentum and arrays is None
        if self.momentum and arrays is not None:  # a file's data: the attention experiments
            changes = {"model": ATTENTION_MODEL, **changes}
            if s.nesterov_t0 == 0:  # (the base case's start, which they cannot take)
                changes["nesterov_t0"] = Settings.param.nesterov_t0.default
        try:
            if momentum:
                r = run_momentum_experiment(s, **changes)
            else:
                r = run_lab_experiment(s, arrays=arrays, **changes)
        except ValueError as exc:
            self._error(str(exc))
            return False
        except (ArithmeticError, np.linalg.LinAlgError) as exc:  # data beyond what runs
            self._error(f"the runs failed on these data ({exc}); rescale them")
            return False
        if arrays is not None and self._generated is None:  # leaving the generated data
            self._generated = {k: getattr(s, k) for k in FILE_SETTINGS}
        self.arrays = arrays
        s.param.update(**{k: r.settings[k] for k in (*FILE_SETTINGS, *changes)})
        self.kernel_input.value, self.value_input.value = s.kernel_diag, s.value_diag
        self.message.visible = False
        if momentum:
            self._show_momentum(r)
        else:
            self._show(r)
        return True

    def _on_upload(self, event) -> None:
        if event.new is None:
            return
        name = self.upload.filename or "the file"
        try:
            arrays = read_upload(self.upload)
        except ValueError as err:
            self._refuse(f"Not used: {err}")
            return
        if not self.run(arrays):
            self._refuse(f"Not used: {name}: {self.message.object}")
            return
        X = arrays["features"]
        names = ", ".join(k for k, v in WEIGHT_ARRAYS.items() if v in arrays)
        missing = " and ".join(f"{k} from its diagonal setting" for k, v in
                               (("A", "kernel"), ("V", "value")) if v not in arrays)
        momenta = ("; P starts the momentum-only softmax model (and the inertial one, which "
                   "runs only when A and V commute)" if "momenta" in arrays else "")
        self.preset = None  # the caption below is the file's
        self.caption.object = (
            f"**Running {name}**: N = {X.shape[0]}, d = {X.shape[1]} ({names}"
            f"{'; ' + missing if missing else ''}). The first-order T_max is found "
            "numerically; the moment systems and the layers start at rest (P(0) = 0)"
            f"{momenta}. The greyed-out settings come from the file.")
        self.upload_note.object = f"Using **{name}** ({names})."
        both = "kernel" in arrays and "value" in arrays
        for widget, off in ((self.kernel_input, "kernel" in arrays),
                            (self.value_input, "value" in arrays),
                            *((self.controls[k], True) for k in FROM_FILE),
                            (self.controls["matrix_draw"], both)):
            widget.disabled = off
        self.generated_button.visible = True

    def _refuse(self, text) -> None:
        """Say why a file is not used; the same file can then be chosen again."""
        self._error(text)
        clear_upload(self.upload)

    def _forget_file(self) -> None:
        """The controls of the generated data again (the runs' settings are the caller's)."""
        self.arrays, self._generated = None, None
        clear_upload(self.upload)
        self.upload_note.object = UPLOAD_HELP
        self.caption.object = ""
        for widget in (self.kernel_input, self.value_input, *self.controls.values()):
            widget.disabled = False
        self.generated_button.visible = False

    def use_generated_data(self) -> bool:
        """Leave the uploaded file: run the generated data again, with the settings they
        had before it (N, d, the diagonals). If that run is refused, the file stays."""
        if not self._run(None, **(self._generated or {})):
            self.message.object = f"Still using the file: {self.message.object}"
            return False
        self._forget_file()
        return True

    def _show_mode(self, momentum: bool) -> None:
        """The momentum plots or the attention plots; the controls the momentum runs do
        not read greyed out while they are shown (a file's greying is its own)."""
        self.momentum_row.visible = momentum
        for row in self.attention_rows:
            row.visible = not momentum
        if self.arrays is None:
            for widget in (self.value_input, *(self.controls[k] for k in NOT_MOMENTUM)):
                widget.disabled = momentum

    def _show_momentum(self, r) -> None:
        """Map a :class:`~dynamics.inertial.momentum.MomentumResult` into the momentum
        plots and the status line."""
        self._ran = self._controls_now()
        self.stale.visible = False
        self._show_mode(True)
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
        for fig in (self.gap_fig, self.path_fig):  # the legends name the runs as run
            for item, key in zip(fig.legend[0].items, RUNS, strict=False):
                item.visible = key in r.runs
                if key in r.runs:
                    item.label = value(r.runs[key].label)
        self.start_src.data = {"x": [r.X0[TRACKED, 0]],
                               "y": [r.X0[TRACKED, 1] if r.X0.shape[1] > 1 else 0.0]}
        start, end = log_range([c.y for c in curves])
        self.gap_fig.y_range.update(start=start, end=end)
        self.gap_fig.yaxis.ticker = decade_ticker(start, end)
        t_lo = min((float(c.x[0]) for c in curves if len(c.x)), default=0.1)
        self.gap_fig.x_range.update(start=t_lo, end=r.horizon)
        self.gap_fig.xaxis.ticker = decade_ticker(10.0 ** math.floor(math.log10(t_lo)),
                                                  10.0 ** math.ceil(math.log10(r.horizon)))
        a = ", ".join(f"{v:.3g}" for v in r.a)
        self.path_fig.title.text = (f"Path of token {TRACKED + 1} in the plane "
                                    f"(a = {a})")
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
        self.status.object = (f"f − f* at t = {r.horizon:g}: {ends}. {lead}{bound}{exact} "
                              f"(RK4, dt = {r.dt:g}).")

    def _show(self, r) -> None:
        """Map the fields of a :class:`~dynamics.inertial.experiments.LabResult` into the
        sources, markers and status line."""
        self._ran = self._controls_now()
        self.stale.visible = False
        self._show_mode(False)
        eigenvalues = (*r.first_order_eigenvalues, *r.accelerated_eigenvalues)
        self.eig_first.data = _lines(r.first_order_eigenvalues)
        self.eig_acc.data = _lines(r.accelerated_eigenvalues)
        place_markers(((self.tmax_marker, r.first_order_time,
                        f"T_max = {r.first_order_time:.3f}"),
                       (self.tacc_marker, r.accelerated_time,
                        f"blow-up {r.accelerated_time:.3f}")),
                      _x_end(eigenvalues))
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
                      _x_end(r.layers.values()))
        self.ham_src.data = {"t": r.hamiltonian.x, "H": r.hamiltonian.y}
        # a conserved H is drawn flat: the axis spans at least HAM_SPAN of its size, not
        # the solver's last digits
        H = np.abs(r.hamiltonian.y)
        self.ham_fig.y_range.min_interval = HAM_SPAN * float(H.max()) if H.size else None
        for model, src in self.soft_src.items():
            src.data = {"t": r.softmax[model].x, "s": r.softmax[model].y}
        for fig, curves, extra in (
                (self.eig_fig, eigenvalues, ()),
                (self.clouds_fig, r.cloud_moments.values(), ()),
                (self.layer_fig, r.layers.values(), (r.theta,)),
                (self.soft_fig, r.softmax.values(), ())):
            start, end = log_range([c.y for c in curves], extra)
            fig.y_range.update(start=start, end=end)
            fig.yaxis.ticker = decade_ticker(start, end)
        notes = "".join(f"; {m}" for m in r.messages)
        crossing = (f"first crossed at layer {r.crossing_layer} (predicted "
                    f"{r.predicted_layer if r.predicted_layer is not None else 'none'})"
                    if r.crossing_layer is not None else "not crossed")
        how = " (numerical)" if r.data.a is None else ""
        self.status.object = (
            f"first-order T_max = {_when(r.first_order_time)}{how}; accelerated blow-up at "
            f"t = {_when(r.accelerated_time)}; θ = {r.theta:g} {crossing}{notes}")

    # ------------------------------------------------------------------ layout
    def __panel__(self):
        controls = pn.Column(
            pn.widgets.Select.from_param(self.param.preset, label="Preset",
                                         sizing_mode="stretch_width"),
            self.kernel_input, self.value_input,
            *self.controls.values(),
            self.run_button, self.upload_note, self.upload, self.generated_button, width=300)
        plots = pn.Column(
            self.status, self.stale, self.caption, self.message, self.momentum_row,
            *self.attention_rows,
            pn.Column(self.explanation, sizing_mode="stretch_width", max_width=900),
            sizing_mode="stretch_width", min_width=320)
        return pn.Row(controls, plots, sizing_mode="stretch_width")
