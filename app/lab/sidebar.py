"""The inertial lab's sidebar, curated as the main tab's (:mod:`app.mainview.controls`):
the preset and Run first, then the few settings a preset is about (the matrices' diagonals,
the damping, the initial second moment), then the rest in collapsed groups.

Only the settings the runs shown read are shown (:func:`shown`): the base case
(``momentum_quadratic``) reads no value matrix, no damping schedule (it runs every
schedule at once) and no layers; the Nesterov ``r`` and ``t0`` only apply to the
``nesterov`` damping. A group none of whose settings is shown is hidden.
"""

from __future__ import annotations

import panel as pn

from dynamics.inertial.momentum import MOMENTUM_MODEL

#: The settings shown first, under the preset and Run: what a preset is about.
ESSENTIALS = ("kernel_diag", "value_diag", "damping", "alpha", "nesterov_r", "nesterov_t0",
              "second_moment")
#: The groups after the essentials, each a title and its settings, collapsed at first.
GROUPS = (
    ("Tokens, matrices and time step", ("n_tokens", "dim", "cloud", "matrix_draw", "seed",
                                        "dt")),
    ("Layers (effective depth)", ("layer_h", "theta")),
)
#: The group of an uploaded weights file (its own panels, not settings).
FILE_GROUP = "Your own data (.npz)"
#: Settings the base case does not read (:mod:`dynamics.inertial.momentum`).
NOT_MOMENTUM = ("value_diag", "damping", "layer_h", "theta")
#: Settings read only with the Nesterov damping (the base case runs it always).
NESTEROV_ONLY = ("nesterov_r", "nesterov_t0")


def shown(name: str, model: str, damping: str) -> bool:
    """Whether the lab shows setting ``name`` for a run of ``model`` with ``damping``."""
    if model == MOMENTUM_MODEL:
        return name not in NOT_MOMENTUM
    return name not in NESTEROV_ONLY or damping == "nesterov"


class Sidebar:
    """The lab's controls: essentials, then collapsed cards.

    Parameters
    ----------
    settings : dynamics.Settings
        The lab's settings (their ``model`` and ``damping`` choose what is shown).
    widgets : dict of str to panel widget
        One widget per setting name (the diagonals' text inputs included).
    head : list
        What comes first (the preset menu, the Run button).
    file_panels : list
        The panels of an uploaded file (its note, the file input, the way back).

    Attributes
    ----------
    groups : dict of str to (panel.Card, list)
        Each group's card and its setting widgets (the file group: no settings).
    column : panel.Column
        The whole sidebar.
    """

    def __init__(self, settings, widgets: dict, head: list, file_panels: list, width=300):
        self.settings, self.widgets = settings, widgets
        essentials = pn.Column(*head, *(widgets[n] for n in ESSENTIALS),
                               sizing_mode="stretch_width", css_classes=["controls"])
        self.groups = {}
        cards = []
        for title, names in (*GROUPS, (FILE_GROUP, ())):
            members = [widgets[n] for n in names]
            extra = file_panels if title == FILE_GROUP else []
            card = pn.Card(*members, *extra, title=title, collapsed=True,
                           sizing_mode="stretch_width", margin=(4, 2),
                           css_classes=["controls-group"])
            self.groups[title] = (card, members)
            cards.append(card)
        self.column = pn.Column(essentials, *cards, width=width, margin=(0, 4))
        settings.param.watch(lambda *events: self.update(), ["model", "damping"])
        self.update()

    def update(self) -> None:
        """Show the settings the current model and damping read; hide empty groups."""
        s = self.settings
        for name, widget in self.widgets.items():
            widget.visible = shown(name, s.model, s.damping)
        for card, members in self.groups.values():
            card.visible = not members or any(w.visible for w in members)

    def visible_settings(self) -> list[str]:
        """The names of the settings shown now, essentials first, then by group."""
        order = (*ESSENTIALS, *(n for _, names in GROUPS for n in names))
        return [n for n in order if self.widgets[n].visible]
