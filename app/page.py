"""The dashboard's page: the title row, the in-app links, the guided tour and the tabs.

:class:`Page` is the part of :class:`app.dashboard.Dashboard` that lays the page out when
it is first shown, opens a tab when asked (the tour, the in-app links to the Theory
page) and builds every tab but the main one when it is first opened: the inertial lab
(:mod:`app.lab.inertial_lab`), the Theory page (:mod:`app.teaching.theory`), the noise
ensemble (:mod:`app.noise.ensemble`) and the Sweep tab (:mod:`app.sweeps.sweep_tab`). A
session costs the server (and the page) only what it shows.
"""

from __future__ import annotations

import json

import panel as pn
import param

from .mainview import layout
from .mainview.controls import checkbox
from .serving import server
from .serving.one_layout import OneLayoutPerMessage
from .serving.resources import read_asset
from .teaching.theory import Theory

#: Stylesheet of the text panes.
CSS = read_asset("style.css")
#: The tabs, in order (their titles).
TABS = ("Nonequilibrium attention", "Inertial lab", "Theory", "Noise ensemble", "Sweep")


class Page(param.Parameterized):
    """The page: its layout and its tabs (built when first opened).

    A mixin of :class:`app.dashboard.Dashboard`, which provides the panels, ``controls``,
    ``links``, ``tour``, ``tour_step``, ``projector``, ``projector_mode``, ``settings``,
    ``set_shown`` and ``apply_settings_json``.
    """

    _layout = None  # the page, built when first shown
    tabs = None  # the tabs (a pn.Tabs), built with the page
    lab = None  # the inertial lab, built when its tab is first opened (None if it failed)
    theory = None  # the Theory page, built when first shown
    ensemble = None  # the noise ensemble view, built when its tab is first opened
    sweep_tab = None  # the Sweep tab, built when first opened

    # -- opening tabs ------------------------------------------------------------
    def show_main(self) -> None:
        """Open the main tab."""
        if self.tabs is not None:
            self.tabs.active = 0

    def show_lab(self):
        """Open the inertial lab (built on first show); the lab, or None if it failed."""
        if self.tabs is not None:
            self.tabs.active = TABS.index("Inertial lab")
        return self.lab

    def show_theory(self, section: str) -> bool:
        """Open the Theory tab at anchor ``section`` (a model's ``spec.section``, a part
        or a heading of the theory text); the in-app links call it.

        Returns
        -------
        bool
            False (nothing changes) when the Theory page has no such anchor.
        """
        theory = self._theory()
        if section not in theory.anchors:
            return False
        if self.tabs is not None:
            self.tabs.active = TABS.index("Theory")
        return theory.show(section, self.links)

    # -- the tabs built when first opened ------------------------------------------
    def _theory(self) -> Theory:
        if self.theory is None:
            self.theory = Theory(stylesheets=[CSS])
        return self.theory

    def _inertial_lab(self):
        try:
            from .lab.inertial_lab import InertialLab
        except ImportError:
            return pn.pane.Markdown(
                "### Inertial attention lab\nThe inertial (momentum) attention lab "
                "is not installed (`app/lab/inertial_lab.py`).")
        try:
            self.lab = InertialLab()
            return self.lab
        except Exception as err:  # the main tab keeps working whatever the lab does
            return pn.pane.Alert(f"The inertial lab failed to start: {type(err).__name__}: {err}",
                                 alert_type="danger")

    def _sweep_tab(self):
        """The Sweep tab (:mod:`app.sweeps.sweep_tab`); a clicked cell loads into the main tab."""
        from .sweeps.sweep_tab import SweepTab

        def load(point):
            if self.apply_settings_json(json.dumps(point)):
                if self.tabs is not None:
                    self.tabs.active = 0
            else:  # e.g. a Part II model, which the main tab does not run
                self.sweep_tab.message.object = (f"**Not loaded into the live view:** "
                                                 f"{self.paste_message}")

        self.sweep_tab = SweepTab(settings=self.settings, on_point=server.locked(load),
                                  model=self.settings.model, example=True)
        return self.sweep_tab

    # -- layout --------------------------------------------------------------
    def __panel__(self):
        if self._layout is None:
            self._build_layout()
        return self._layout

    def _build_layout(self):
        view = (checkbox(self.timeseries, "log_kl", "Logarithmic KL axis"),
                pn.widgets.Select.from_param(self.heatmaps.param.color_scale,
                                             label="Colour scale of A and A*",
                                             sizing_mode="stretch_width"),
                self.clustering.rescaled_toggle)
        c = self.controls
        part_one = layout.main_tab(self, c.sidebar({
            "Weights and sentences": [self.real_heads],
            "View": list(view),
            "Compare runs": [c.compare, self.pinned.panel()],
            "Export, slides and settings as text": [
                self.downloads, self.slide_downloads, self.page_download, c.paste,
                c.apply_paste, c.paste_note],
        }))
        tour_button = pn.widgets.Button(label="Guided tour", width=140, margin=(4, 10),
                                        disabled=not self.tour.steps)
        tour_button.on_click(server.locked(lambda event: self.param.update(
            tour_step=self.tour_step or 1)))
        projector = pn.widgets.Toggle.from_param(self.param.projector, label="Projector mode",
                                                 width=140, margin=(4, 10))
        # The lab and the Theory page are built when their tab is first opened: a
        # session costs the server (and the page) only what it shows.
        lab = pn.Column(sizing_mode="stretch_width")
        theory = pn.Column(sizing_mode="stretch_width")
        ensemble = pn.Column(sizing_mode="stretch_width")
        sweep = pn.Column(sizing_mode="stretch_width")
        self.tabs = pn.Tabs(*zip(TABS, (part_one, lab, theory, ensemble, sweep), strict=True))

        def build_tab(event):
            self.set_shown(event.new == 0)  # the main run waits while it is not shown
            if event.new == TABS.index("Inertial lab") and not len(lab):
                built = self._inertial_lab()
                if self.projector:  # its plots get the projector's type too, before they
                    # reach the page (restyled there, their changes could arrive before
                    # the plots themselves: "reference … isn't known")
                    self.projector_mode.apply(False)
                    self.projector_mode.apply(True)
                lab[:] = [built]
            elif event.new == TABS.index("Theory") and not len(theory):
                theory[:] = [self._theory()]
            elif event.new == TABS.index("Noise ensemble") and not len(ensemble):
                from .noise.ensemble import EnsembleView
                self.ensemble = EnsembleView(settings=self.settings, example=True)
                ensemble[:] = [self.ensemble]
            elif event.new == TABS.index("Sweep") and not len(sweep):
                sweep[:] = [self._sweep_tab()]

        self.tabs.param.watch(build_tab, "active")
        self.title = pn.pane.Markdown(
            "## Nonequilibrium attention: Fisher–Rao relaxation and Hamiltonian tokens",
            margin=(0, 10))
        page = pn.Column(
            pn.Row(self.title, pn.HSpacer(), tour_button, projector,
                   self.projector_mode.window,
                   OneLayoutPerMessage(width=0, height=0, margin=0),  # a step shown at once
                   sizing_mode="stretch_width"),
            self.links,
            self.tour,
            self.tabs,
            sizing_mode="stretch_width",
        )
        self._layout = page
        if self.tour_step:
            self._show_tour_step()
        if self.projector:
            self.projector_mode.apply(True)
        return page
