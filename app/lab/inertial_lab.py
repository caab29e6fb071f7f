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

The plots are drawn by :class:`~app.lab.attention_plots.AttentionPlots` and
:class:`~app.lab.momentum_plots.MomentumPlots` (:attr:`InertialLab.attention_plots`,
:attr:`InertialLab.momentum_plots`; their axes and markers: :mod:`app.lab.plotting`), laid
out by :class:`~app.lab.plot_area.PlotArea` (only the run's plots; in projector mode only a
preset's own, its ``focus``); the sidebar is :class:`~app.lab.sidebar.Sidebar` (the
essentials, then groups; only the settings the run reads). This module holds the controls,
the presets, the uploaded files and the runs.
"""

from __future__ import annotations

import json
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import panel as pn
import param

from app.mainview.explain import models_text
from app.mainview.uploads import clear_upload, read_upload
from app.serving import katex
from app.serving.resources import asset, read_asset
from app.serving.server import locked
from dynamics.inertial.experiments import run_lab_experiment
from dynamics.inertial.momentum import MOMENTUM_MODEL, run_momentum_experiment
from dynamics.settings import Settings
from dynamics.weights_file import WEIGHT_ARRAYS

from .attention_plots import AttentionPlots
from .momentum_plots import RUN_STYLES, MomentumPlots
from .plot_area import NAMES, PlotArea
from .sidebar import FILE_GROUP, Sidebar

#: The presets of the lab (``assets/presets/inertial.json``, see :mod:`app.serving.resources`).
PRESETS_PATH = asset("presets", "inertial.json")
CONTROLS = ["matrix_draw", "damping", "alpha", "nesterov_r", "nesterov_t0", "layer_h",
            "theta", "cloud", "second_moment", "n_tokens", "dim", "seed", "dt"]
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
#: The model of the attention experiments when a file leaves the momentum runs.
ATTENTION_MODEL = "linear_accelerated"
#: Said under the plots when a softmax model cannot run the settings (a neutral note: a
#: preset may mean it, e.g. V ⪯ 0 leaves the inertial model without a kinetic energy).
SOFTMAX_NOTE = "ℹ **The softmax plot leaves out what these settings do not allow** — "
#: The sidebar in projector mode: a drawer over the plots at the window's right edge.
DRAWER_STYLES = {"position": "fixed", "z-index": "20", "top": "44px", "right": "0px",
                 "background": "white", "box-shadow": "-2px 2px 10px rgba(0, 0, 0, 0.35)",
                 "max-height": "calc(100vh - 50px)", "overflow-y": "auto", "padding": "4px"}


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
            focus = [str(n) for n in p.get("focus", [])]
            if set(focus) - set(NAMES):
                raise ValueError(f"unknown plots in focus {sorted(set(focus) - set(NAMES))}")
            good.append({"name": str(p["name"]), "caption": str(p.get("caption", "")),
                         "settings": dict(p["settings"]), "focus": focus})
        except (KeyError, TypeError, ValueError) as exc:
            errors.append(f"preset {i} ({p.get('name', '?') if isinstance(p, dict) else p}): "
                          f"{exc}")
    return good, errors


def softmax_note(messages) -> str:
    """The note under the plots for the softmax models that could not run
    (``"model: reason"`` each; the reason often names its model already); "" for none."""
    reasons = []
    for m in messages:
        model, _, reason = m.partition(": ")
        reasons.append(reason if reason.startswith(model) else m)
    return SOFTMAX_NOTE + "; ".join(reasons) + "." if reasons else ""


def _control(settings, name):
    """The widget of one setting, as :class:`panel.Param` would make it (a menu, or an
    integer or number slider), as wide as the controls."""
    p = settings.param[name]
    kind = (pn.widgets.Select if isinstance(p, param.Selector) else
            pn.widgets.IntSlider if isinstance(p, param.Integer) else pn.widgets.FloatSlider)
    return kind.from_param(p, sizing_mode="stretch_width")


class InertialLab(pn.viewable.Viewer):
    """The Part II tab: controls, the momentum plots or the six attention plots, and a
    status line."""

    preset = param.Selector(default=None, objects=[None], allow_None=True,
                            doc="Preset to load.")
    projector = param.Boolean(default=False, doc=(
        "Projector mode (app.teaching.projector sets it): only the preset's own plots, "
        "taller, in one row; the sidebar a drawer; no caption, status or equations."))
    projector_scale = param.Number(default=1.0, bounds=(0.5, 4.0), doc=(
        "Scale of the plots' height in projector mode (the projector's, by window size)."))

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
        #: What the softmax plot leaves out and why (a note, not an error).
        self.note = pn.pane.Markdown("", sizing_mode="stretch_width", visible=False,
                                     styles={"color": "#444"})
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
        #: The plots of the attention experiments and of the momentum runs.
        self.attention_plots, self.momentum_plots = AttentionPlots(), MomentumPlots()
        self.figures = (*self.momentum_plots.figures, *self.attention_plots.figures)
        #: The plots on the page (those of the run shown, the preset's own first).
        self.plot_area = PlotArea(dict(zip(NAMES, self.figures, strict=True)))
        self.focus: list[str] = []  # the preset's own plots
        self._momentum_shown = False  # the plots shown are the base case's
        self.controls_toggle = pn.widgets.Toggle(label="☰ Lab controls", value=False,
                                                 visible=False, width=130, margin=(4, 10))
        self.explanation = pn.pane.LaTeX(
            models_text(part=2), renderer="katex", sizing_mode="stretch_width",
            css_classes=["explain"], stylesheets=[katex.STYLESHEET, read_asset("style.css")])
        self.explanation_column = pn.Column(self.explanation, sizing_mode="stretch_width",
                                            max_width=900)
        katex.install_fonts()
        self.sidebar = self._sidebar()
        self.param.watch(lambda *events: self._layout(), ["projector", "projector_scale"])
        self.controls_toggle.param.watch(lambda *events: self._layout(), "value")
        self.param.watch(self._load_preset, "preset")
        if self.presets and self.preset is None:  # the lab opens on its first preset, run
            self.preset = self.presets[0]["name"]

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
        self.focus = list(p["focus"])
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
        self._show(r, momentum)
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
        self.focus = []
        self._layout()
        self.caption.object = (
            f"**Running {name}**: N = {X.shape[0]}, d = {X.shape[1]} ({names}"
            f"{'; ' + missing if missing else ''}). The first-order Tₘₐₓ is found "
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

    def _layout(self) -> None:
        """Lay the page out for the run shown and the mode: the run's plots (the preset's
        own first; in projector mode only those, taller), the sidebar (in projector mode a
        drawer the "Lab controls" button opens), the texts (none in projector mode but a
        message)."""
        on = self.projector
        self.plot_area.show(self.plot_area.order(self._momentum_shown, self.focus, on),
                            projector=on, scale=self.projector_scale)
        self.controls_toggle.visible = on
        self.sidebar.column.visible = not on or self.controls_toggle.value
        self.sidebar.column.styles = DRAWER_STYLES if on else {}
        for pane in (self.caption, self.status, self.explanation_column):
            pane.visible = not on
        # the note is the softmax plot's fine print: not under a preset about other
        # plots (a teaching preset must not look like a failure, issue #35)
        about_softmax = not self.focus or "softmax" in self.focus
        self.note.visible = bool(self.note.object) and about_softmax and (
            not on or "softmax" in self.plot_area.shown)

    def shown_figures(self) -> list:
        """The figures on the page now, in order."""
        return [self.plot_area.figures[n] for n in self.plot_area.shown]

    def _show(self, r, momentum: bool) -> None:
        """Show a result in the status line and its plots: a
        :class:`~dynamics.inertial.momentum.MomentumResult` in the momentum plots
        (``momentum``), else a :class:`~dynamics.inertial.experiments.LabResult` in the
        attention plots."""
        self._ran, self.stale.visible = self._controls_now(), False
        # (the layout shows the softmax note or not)
        self.note.object = "" if momentum else softmax_note(r.messages)
        plots = self.momentum_plots if momentum else self.attention_plots
        # the plots on the page, then their data, in one message (data for plots the page
        # had dropped came first: "reference … isn't known" for each of their sources)
        with pn.io.hold():
            self._momentum_shown = momentum
            self._layout()
            self.status.object = plots.show(r)

    # ------------------------------------------------------------------ layout
    def _sidebar(self) -> Sidebar:
        """The sidebar (:class:`~app.lab.sidebar.Sidebar`): the preset and Run first."""
        head = [pn.widgets.Select.from_param(self.param.preset, label="Preset",
                                             sizing_mode="stretch_width"), self.run_button]
        widgets = {"kernel_diag": self.kernel_input, "value_diag": self.value_input,
                   **self.controls}
        return Sidebar(self.settings, widgets, head,
                       [self.upload_note, self.upload, self.generated_button])

    def __panel__(self):
        plots = pn.Column(
            pn.Row(self.controls_toggle, self.status, sizing_mode="stretch_width"),
            self.stale, self.caption, self.message, self.plot_area.column, self.note,
            self.explanation_column, sizing_mode="stretch_width", min_width=320)
        return pn.Row(self.sidebar.column, plots, sizing_mode="stretch_width")


__all__ = ["ATTENTION_MODEL", "CONTROLS", "FILE_GROUP", "FILE_SETTINGS", "FROM_FILE",
           "PRESETS_PATH", "RUN_STYLES", "SOFTMAX_NOTE", "STALE", "UPLOAD_HELP",
           "InertialLab", "load_presets", "softmax_note"]
