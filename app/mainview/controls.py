"""The control panel: every widget is built from a parameter of ``dynamics.Settings``.

Nothing is declared twice: names, labels, bounds, steps and tooltips come from the
parameters; β and γ get logarithmic sliders whose ends are the parameters' bounds.
Which controls apply to which model comes from the model registry
(:func:`app.models.applies`); the app only chooses the order they are shown in.
"""

from __future__ import annotations

import math

import panel as pn
import param
from bokeh.models import CustomJSTickFormatter

from app.models import MAIN_PART, applies, label, main_models
from app.serving.server import locked
from dynamics import Settings, models

from .slider_aria import LOG_SLIDER_CLASS, RealValueAria

#: Display order of the main tab's settings (a setting a Part I model reads and not
#: listed here is shown after them, in the order of ``Settings``).
ORDER = (
    "model", "beta", "gamma", "logit_noise", "n_tokens", "dim", "mass", "kappa", "confinement",
    "path", "omega", "amplitude", "switch_time", "settle_rate",
    "init_attention", "init_momentum", "dt", "seed",
)
#: Settings read by the models but never shown as a control (a safety limit of the run).
HIDDEN = ("norm_limit",)
#: Longest pasted settings text (characters); the same limit as the dashboard's.
MAX_PASTE = 20_000
#: Settings drawn on a log10 slider.
LOG_SCALE = ("beta", "gamma")
#: The settings shown first, above the groups: what a lecture moves.
ESSENTIALS = ("model", "beta", "gamma")
#: The sidebar's groups of settings after the essentials, each a title and its settings,
#: collapsed at first; a group shows only while one of its settings applies to the model.
#: A setting a model reads and no group lists goes to :data:`OTHER_GROUP`.
GROUPS = (
    ("Tokens and initial state", ("n_tokens", "dim", "mass", "kappa", "confinement",
                                  "init_attention", "init_momentum", "dt", "seed")),
    ("Path of the scores", ("path", "omega", "amplitude", "switch_time", "settle_rate")),
    ("Tokens on the sphere", ("sphere_kernel", "sphere_weights", "cluster_eps")),
    ("Weights and sentences", ("weights", "checkpoint", "text", "sentence", "layer", "head",
                               "heads")),
    ("Noise", ("logit_noise",)),
)
#: Title of the group of settings no other group lists.
OTHER_GROUP = "More settings"
#: Groups that open by themselves when a newly chosen model reads them (its own settings).
OPEN_WITH_MODEL = ("Path of the scores", "Tokens on the sphere")
#: The group of real weights, open by itself while a run's weights are not seeded (a real
#: head, your own sentence): its sentence, layer and head are then what the run is about.
WEIGHTS_GROUP = "Weights and sentences"


def shown_settings() -> tuple:
    """The settings the main tab shows: every one a Part I model reads, in display order.

    Returns
    -------
    tuple of str
        :data:`ORDER` first, then any other setting a registered Part I model reads
        (a model added later brings its own controls), without :data:`HIDDEN`.
    """
    read = {name for spec in models.specs(part=MAIN_PART) for name in spec.reads()}
    rest = tuple(n for n in Settings.names() if n in read and n not in ORDER)
    return tuple(n for n in ORDER + rest if n in read and n not in HIDDEN)


def log_slider(settings: Settings, name: str) -> pn.widgets.FloatSlider:
    """A slider over log10 of setting ``name``, kept in sync with it both ways."""
    p = settings.param[name]
    lo, hi = p.bounds
    fmt = CustomJSTickFormatter(code="return Number(Math.pow(10, tick).toPrecision(3)).toString()")
    slider = pn.widgets.FloatSlider(
        label=label(name), start=math.log10(lo), end=math.log10(hi), step=0.01,
        value=math.log10(getattr(settings, name)), format=fmt,
        css_classes=[LOG_SLIDER_CLASS],  # (its real value for screen readers: RealValueAria)
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


def checkbox(obj: param.Parameterized, name: str, label: str) -> pn.widgets.CheckBoxGroup:
    """A checkbox for the boolean parameter ``name`` of ``obj``, toggled by its label too.

    Bokeh's ``Checkbox`` draws its label outside the ``<label>`` element, so a click on
    the text does nothing; a one-option ``CheckBoxGroup`` draws ``<label><input>
    text</label>``. Kept in sync with the parameter both ways.

    Parameters
    ----------
    obj : param.Parameterized
    name : str
        A ``param.Boolean`` of ``obj``.
    label : str

    Returns
    -------
    panel.widgets.CheckBoxGroup
        Its value is ``[label]`` when the parameter is true, ``[]`` when false.
    """
    box = pn.widgets.CheckBoxGroup(options=[label], value=[label] if getattr(obj, name) else [],
                                   sizing_mode="stretch_width")
    box.param.watch(lambda event: setattr(obj, name, label in event.new), "value")
    obj.param.watch(lambda event: setattr(box, "value", [label] if event.new else []), name)
    return box


def build_widgets(settings: Settings) -> dict[str, pn.widgets.Widget]:
    """One widget per shown setting (:func:`shown_settings`), built from its parameter.

    Parameters
    ----------
    settings : dynamics.Settings
        The settings the widgets edit (both ways).

    Returns
    -------
    dict of str to panel.widgets.Widget
        By setting name, in display order; the model menu lists :func:`main_models`.
    """
    widgets = {}
    for name in shown_settings():
        p = settings.param[name]
        if name in LOG_SCALE:
            widgets[name] = log_slider(settings, name)
        elif name == "model":
            widgets[name] = pn.widgets.Select.from_param(
                p, label=label(name), options=list(main_models()))
        elif isinstance(p, param.Selector):
            widgets[name] = pn.widgets.Select.from_param(p, label=label(name))
        elif name == "seed":
            widgets[name] = pn.widgets.IntInput.from_param(p, label=label(name))
        elif isinstance(p, param.Integer):
            widgets[name] = pn.widgets.IntSlider.from_param(p, label=label(name))
        elif isinstance(p, param.Number):
            widgets[name] = pn.widgets.EditableFloatSlider.from_param(p, label=label(name))
        else:
            widgets[name] = pn.widgets.TextInput.from_param(p, label=label(name))
        widgets[name].sizing_mode = "stretch_width"  # as wide as the sidebar
    return widgets


class Controls(pn.viewable.Viewer):
    """The sidebar: settings widgets whose visibility follows the selected model."""

    settings = param.ClassSelector(class_=Settings, doc="The settings the widgets edit.")

    def __init__(self, dashboard, **params):
        super().__init__(settings=dashboard.settings, **params)
        self.widgets = build_widgets(self.settings)
        d = dashboard
        self.play = pn.widgets.Toggle.from_param(
            d.param.playing, label="▶ Play / ❚❚ Pause", color="success",
            sizing_mode="stretch_width")
        self.step = pn.widgets.Button(label="Step", color="primary", width=80)
        self.replay = pn.widgets.Button(
            label="↺ Replay from A(0)", color="light", sizing_mode="stretch_width",
            description="Run again from the initial state A(0), X(0) and play")
        self.replay.on_click(locked(lambda _: d.replay()))
        # Buttons change Bokeh models: their handlers run under the document lock
        self.step.on_click(locked(lambda _: d.step_once()))
        self.reset = pn.widgets.Button(label="Reset", color="warning", sizing_mode="stretch_width")
        self.reset.on_click(locked(lambda _: d.reset()))
        self.steps_per_frame = pn.widgets.IntSlider.from_param(
            d.param.steps_per_frame, label="Steps per frame", sizing_mode="stretch_width")
        self.compare = checkbox(d, "compare", "Compare with the reduced model")
        # choosing a preset loads it; the menu shows the preset that runs, or "your own
        # settings" (app.settings_io.CUSTOM)
        self.preset = pn.widgets.Select.from_param(d.param.preset, label="Preset",
                                                   sizing_mode="stretch_width")
        # the settings box shows the current settings of the model (live); a pasted
        # object may give only some of them
        self.paste = pn.widgets.TextAreaInput(
            label="Settings (JSON: edit or paste some, then apply)", value=d.settings_json(),
            height=120, max_length=MAX_PASTE, sizing_mode="stretch_width")
        self._settings_json = d.settings_json
        self.apply_paste = pn.widgets.Button(
            label="Apply pasted settings", color="primary", sizing_mode="stretch_width",
            description="Set the settings given in the box (the others keep their values) "
                        "and restart the run")
        self.apply_paste.on_click(locked(lambda _: d.apply_settings_json(self.paste.value)))
        self.paste_note = d.paste_note  # what became of the pasted settings, under the box
        self.settings.param.watch(lambda *_: self.update_visibility(),
                                  ["model", "path", "weights"])
        self.settings.param.watch(self._show_settings, Settings.names())
        self.groups = {}  # title → (card, its setting widgets), made by sidebar()
        self.update_visibility()

    def _show_settings(self, *events) -> None:
        """Keep the settings box on the current settings."""
        self.paste.value = self._settings_json()

    def update_visibility(self) -> None:
        """Hide the controls that do not apply to the selected model and path, and the
        groups none of whose settings apply; open a model's own group when it appears."""
        for name, widget in self.widgets.items():
            widget.visible = applies(name, self.settings)
        for title, (card, widgets) in self.groups.items():
            shown = not widgets or any(w.visible for w in widgets)
            if shown and not card.visible and title in OPEN_WITH_MODEL:
                card.collapsed = False
            if shown and title == WEIGHTS_GROUP and self.settings.weights != "seed":
                card.collapsed = False
            card.visible = shown

    def grouped(self) -> list[tuple[str, list[str]]]:
        """The shown settings after :data:`ESSENTIALS`, by group: (title, names) in the
        order of :data:`GROUPS`, then :data:`OTHER_GROUP`; empty groups left out."""
        names = [n for n in self.widgets if n not in ESSENTIALS]
        listed = {n for _, group in GROUPS for n in group}
        groups = [(title, [n for n in names if n in group]) for title, group in GROUPS]
        groups.append((OTHER_GROUP, [n for n in names if n not in listed]))
        return [(title, group) for title, group in groups if group]

    def sidebar(self, extras: dict | None = None) -> list:
        """The sidebar: the essentials (play, step, reset, replay; speed; preset; model,
        β, γ), then one collapsed card per group of settings (:meth:`grouped`) and per
        extra panel.

        Parameters
        ----------
        extras : dict of str to list, optional
            More panels by group title: added to the group of that title (after its
            settings), or as a group of their own after the settings' groups.

        Returns
        -------
        list
            The sidebar's items; the cards are also ``self.groups`` (title → (card, its
            setting widgets)).
        """
        extras = dict(extras or {})
        essentials = [
            pn.Row(self.play, self.step, sizing_mode="stretch_width"),
            pn.Row(self.reset, self.replay, sizing_mode="stretch_width"),
            self.steps_per_frame, self.preset,
            *(self.widgets[n] for n in ESSENTIALS if n in self.widgets),
        ]
        self.groups = {}
        cards = []
        groups = [(title, [self.widgets[n] for n in names]) for title, names in self.grouped()]
        groups += [(title, []) for title in extras if title not in dict(groups)]
        for title, widgets in groups:
            card = pn.Card(*widgets, *extras.get(title, ()), title=title, collapsed=True,
                           sizing_mode="stretch_width", margin=(4, 2),
                           css_classes=["controls-group"])
            self.groups[title] = (card, widgets)
            cards.append(card)
        self.update_visibility()
        aria = RealValueAria(width=0, height=0, margin=0)  # real values of log sliders
        return [pn.Column(*essentials, aria, sizing_mode="stretch_width",
                          css_classes=["controls"]), *cards]

    def __panel__(self):
        return pn.Column(*self.sidebar(), sizing_mode="stretch_width")
