"""The control panel: every widget is built from a parameter of ``dynamics.Settings``.

Nothing is declared twice: names, bounds, steps and tooltips come from the
parameters; β and γ get logarithmic sliders whose ends are the parameters'
bounds.  Which controls apply to which model is stated once, in
:data:`APPLIES_TO`.
"""

from __future__ import annotations

import math
from types import MappingProxyType

import panel as pn
import param
from bokeh.models import CustomJSTickFormatter

from dynamics import PART_I_MODELS, Settings

#: Settings shown on the main tab, in display order.
SHOWN = (
    "model", "beta", "gamma", "n_tokens", "dim", "mass", "kappa", "confinement",
    "path", "omega", "amplitude", "switch_time", "settle_rate",
    "init_attention", "init_momentum", "dt", "seed",
)
#: Longest pasted settings text (characters); the same limit as the dashboard's.
MAX_PASTE = 20_000
#: Settings drawn on a log10 slider.
LOG_SCALE = ("beta", "gamma")

_COUPLED = ("canonical", "value_matching", "cotangent_lift")
#: Models each setting applies to (a setting not listed applies to every model).
APPLIES_TO = MappingProxyType({
    "gamma": ("attention",) + _COUPLED,
    "init_attention": ("attention",) + _COUPLED,
    "mass": ("canonical", "value_matching", "reduced"),
    "kappa": ("value_matching",),
    "confinement": _COUPLED + ("reduced",),
    "init_momentum": ("canonical", "value_matching", "cotangent_lift", "reduced"),
    "path": ("attention",),
})
#: Path settings, visible for the attention model on the paths that use them.
PATH_SETTINGS = MappingProxyType({
    "omega": ("rotation", "oscillation"),
    "amplitude": ("oscillation", "drift", "switch"),
    "switch_time": ("switch",),
    "settle_rate": ("converging",),
})

#: Display labels (the parameters' docs become the tooltips).
LABELS = MappingProxyType({
    "model": "Model", "beta": "β (inverse temperature)", "gamma": "γ (relaxation rate)",
    "n_tokens": "N (tokens)", "dim": "d (feature dimension)", "mass": "m (mass)",
    "kappa": "κ (value matching)", "confinement": "k (confinement)", "path": "Feature path",
    "omega": "ω (angular speed)", "amplitude": "δ (amplitude)",
    "switch_time": "t_s (switch time)", "settle_rate": "μ (settle rate)",
    "init_attention": "Initial attention A(0)", "init_momentum": "Initial momenta P(0)",
    "dt": "dt (time step)", "seed": "Seed",
})


def applies(name: str, settings: Settings) -> bool:
    """Whether setting ``name`` has an effect on the run of ``settings``."""
    model = settings.model
    if name in PATH_SETTINGS:
        return model == "attention" and settings.path in PATH_SETTINGS[name]
    return model in APPLIES_TO.get(name, PART_I_MODELS)


def log_slider(settings: Settings, name: str) -> pn.widgets.FloatSlider:
    """A slider over log10 of setting ``name``, kept in sync with it both ways."""
    p = settings.param[name]
    lo, hi = p.bounds
    fmt = CustomJSTickFormatter(code="return Number(Math.pow(10, tick).toPrecision(3)).toString()")
    slider = pn.widgets.FloatSlider(
        label=LABELS.get(name, name), start=math.log10(lo), end=math.log10(hi), step=0.01,
        value=math.log10(getattr(settings, name)), format=fmt,
    )
    # Panel holds every change from the page back for its debounce (50 ms) before the
    # server sees it; β and γ change nothing but the next frame, so they go at once.
    slider._debounce = 0
    busy = []

    def to_settings(event):
        if busy:
            return
        busy.append(1)
        try:
            value = float(f"{10 ** event.new:.4g}")
            setattr(settings, name, min(max(value, lo), hi))
        finally:
            busy.pop()

    def to_slider(event):
        if busy:
            return
        busy.append(1)
        try:
            slider.value = math.log10(event.new)
        finally:
            busy.pop()

    slider.param.watch(to_settings, "value")
    settings.param.watch(to_slider, name)
    return slider


def build_widgets(settings: Settings) -> dict[str, pn.widgets.Widget]:
    """One widget per shown setting, built from its parameter."""
    widgets = {}
    for name in SHOWN:
        p = settings.param[name]
        if name in LOG_SCALE:
            widgets[name] = log_slider(settings, name)
        elif name == "model":
            widgets[name] = pn.widgets.Select.from_param(
                p, label=LABELS[name], options=list(PART_I_MODELS))
        elif isinstance(p, param.Selector):
            widgets[name] = pn.widgets.Select.from_param(
                p, label=LABELS[name])
        elif name == "seed":
            widgets[name] = pn.widgets.IntInput.from_param(
                p, label=LABELS[name])
        elif isinstance(p, param.Integer):
            widgets[name] = pn.widgets.IntSlider.from_param(
                p, label=LABELS[name])
        else:
            widgets[name] = pn.widgets.EditableFloatSlider.from_param(
                p, label=LABELS[name])
    return widgets


class Controls(pn.viewable.Viewer):
    """The sidebar: settings widgets whose visibility follows the selected model."""

    settings = param.ClassSelector(class_=Settings, doc="The settings the widgets edit.")

    def __init__(self, dashboard, **params):
        super().__init__(settings=dashboard.settings, **params)
        self.widgets = build_widgets(self.settings)
        d = dashboard
        self.play = pn.widgets.Toggle.from_param(
            d.param.playing, label="▶ Play / ❚❚ Pause", color="success")
        self.step = pn.widgets.Button(label="Step", color="primary")
        self.step.on_click(lambda _: d.step_once())
        self.reset = pn.widgets.Button(label="Reset", color="warning")
        self.reset.on_click(lambda _: d.reset())
        self.steps_per_frame = pn.widgets.IntSlider.from_param(
            d.param.steps_per_frame, label="Steps per frame")
        self.compare = pn.widgets.Checkbox.from_param(
            d.param.compare, label="Compare with the reduced model")
        self.preset = pn.widgets.Select.from_param(d.param.preset, label="Preset",
                                                   sizing_mode="stretch_width")
        self.load_preset = pn.widgets.Button(label="Load preset", color="primary",
                                             sizing_mode="stretch_width")
        self.load_preset.on_click(lambda _: d.load_preset())
        self.paste = pn.widgets.TextAreaInput(
            label="Paste settings (JSON)", value=d.settings_json(), height=120,
            max_length=MAX_PASTE, sizing_mode="stretch_width")
        self.apply_paste = pn.widgets.Button(label="Apply pasted settings", color="primary",
                                             sizing_mode="stretch_width")
        self.apply_paste.on_click(lambda _: d.apply_settings_json(self.paste.value))
        self.settings.param.watch(lambda *_: self.update_visibility(), ["model", "path"])
        self.update_visibility()

    def update_visibility(self) -> None:
        """Hide the controls that do not apply to the selected model and path."""
        for name, widget in self.widgets.items():
            widget.visible = applies(name, self.settings)

    def __panel__(self):
        return pn.Column(
            pn.Row(self.play, self.step, self.reset, sizing_mode="stretch_width"),
            self.steps_per_frame,
            self.preset, self.load_preset,
            *self.widgets.values(),
            self.compare,
            self.paste, self.apply_paste,
            width=310, css_classes=["controls"],
        )
