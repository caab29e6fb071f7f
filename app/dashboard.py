"""The dashboard: a ``pn.viewable.Viewer`` holding the run, its panels and its tabs.

One :class:`dynamics.Simulation` (plus, in comparison mode, a second one of the
comparison model, :data:`app.models.COMPARISON_MODEL`) is advanced by one periodic
callback per browser session (:class:`app.serving.playback.Playback`); settings come from the
widgets, the URL, presets and pasted JSON (:class:`app.settings_io.SettingsIO`); the page
and its tabs are laid out by :class:`app.page.Page`. This module builds the panels and
decides what a setting change does (through :meth:`dynamics.Simulation.sync`).
"""

from __future__ import annotations

import math
from collections import deque

import panel as pn
import param

from dynamics import RUNNING, Settings, Simulation
from dynamics.models.part_one import runaway_notice

from .lab.inertial_lab import load_presets as load_lab_presets
from .mainview import export
from .mainview.clustering import Clustering
from .mainview.controls import Controls
from .mainview.explain import Explanation
from .mainview.head_choice import fit_real_head
from .mainview.heatmaps import Heatmaps
from .mainview.model_lines import zero_text
from .mainview.real_heads import RealHeads
from .mainview.timeseries import TimeSeries
from .mainview.trajectories import Trajectories
from .models import COMPARISON_MODEL, fit_real_heads, not_applicable
from .page import CSS, TABS, Page  # noqa: F401 (TABS: read here by the tests)
from .serving import katex, server
from .serving.playback import STATUS_STYLE, Playback, frame_is_finite
from .settings_io import VIEW_PARAMS, SettingsIO
from .teaching import slides
from .teaching.pinned import PinnedRuns
from .teaching.projector import Projector
from .teaching.theory import TheoryLinks
from .teaching.tour import Tour

# The server plumbing lives in app.serving.server, the playback in app.serving.playback
# and the page in app.page; these names stay readable here (the browser tests count
# app.dashboard.live_callbacks(); the fast tests read app.dashboard.TABS and CSS).
running_dashboards = server.running_dashboards
live_callbacks = server.live_callbacks

#: Memory budget of the recorded history of one session (bytes).
HISTORY_BYTES = 20_000_000


class Dashboard(Page, Playback, SettingsIO, pn.viewable.Viewer):
    """Live dashboard of nonequilibrium attention (the main tab), the inertial lab and
    the Theory page."""

    settings = param.ClassSelector(class_=Settings, doc="The settings of the run.")
    compare = param.Boolean(
        default=False,
        doc="Run the reduced (softmax-slaved) model beside the selected one (restarts the run).")
    tour_step = param.Integer(
        default=0, bounds=(0, 99),
        doc="Step of the guided tour shown (1, 2, …; 0: no tour).")
    projector = param.Boolean(
        default=False,
        doc="Projector mode: large type, A beside A* and three more plots, fits 1280×720 "
            "without scrolling.")

    _ready = False  # True once every panel exists (watchers wait for it)
    _batch = False  # settings are being changed together: restart once, at the end
    _run_error = False  # the notice shows an error of the run (cleared by Reset)
    _norm0 = math.nan  # ‖X‖ at the start of the run (the confinement notice's reference)
    _runaway = None  # the confinement notice, once this run's features ran away

    def __init__(self, query=None, **params):
        if params.get("settings") is None:
            params["settings"] = Settings()
        super().__init__(**params)
        self._init_playback()
        notices = self._init_presets()
        if query is None and pn.state.curdoc is not None and pn.state.curdoc.session_context:
            query = pn.state.session_args
        if query:
            refused = self.apply_query(query)
            notices += refused
            if refused:  # the URL keeps what was applied, not a value it refused
                pn.state.onload(self._sync_url)
        # a real head that does not exist (?weights=minilm&layer=3): the nearest that does
        notices += fit_real_head(self.settings)
        self.notice = "\n".join(notices)
        self.sim = Simulation(self.settings)
        self.reference = None
        self.reference_settings = None
        katex.install_fonts()

        self.heatmaps = Heatmaps(self.settings.n_tokens)
        self.timeseries = TimeSeries()
        self.trajectories = Trajectories()
        self.heatmaps.link_tokens(self.trajectories)  # point at a token (issue #27)
        self.clustering = Clustering()
        self.real_heads = RealHeads(self)  # words on the axes, the heads' grid, the upload
        self.explanation = Explanation(settings=self.settings, stylesheets=[CSS])
        self.controls = Controls(self)
        self.real_heads.attach(self.controls)  # sliders span what exists; sentences by text
        self.status = pn.pane.Markdown("", styles=dict(STATUS_STYLE), sizing_mode="stretch_width",
                                       margin=(0, 10))
        self.alert = pn.pane.Alert("", alert_type="warning", visible=False,
                                   sizing_mode="stretch_width")
        # the confinement bound, said once the features run away (its divergence message
        # repeats it)
        self.confinement = pn.pane.Alert("", alert_type="info", visible=False,
                                         sizing_mode="stretch_width")
        self.caption = pn.pane.Markdown("", css_classes=["caption"], stylesheets=[CSS],
                                        sizing_mode="stretch_width")
        # what the model has ≡ 0 by construction (its plots are not shown), in one line
        self.zero_line = pn.pane.Markdown("", visible=False, sizing_mode="stretch_width",
                                          margin=(0, 10), css_classes=["zero-line"],
                                          stylesheets=[CSS])
        self.downloads = export.download_buttons(self)
        self.slide_downloads = slides.download_buttons(self)  # issue #16: slides
        self.page_download = export.page_button(self)  # issue #39: a page to take home
        self.pinned = PinnedRuns(self)  # issue #16: pinned runs drawn as ghosts
        self.links = TheoryLinks(on_link=server.locked(self.show_theory))
        self.tour = Tour(self)
        self.tour.validate([p.get("name") for p in self._presets if isinstance(p, dict)],
                           [p["name"] for p in load_lab_presets()[0]])
        self.projector_mode = Projector(self)
        self.settings.param.watch(self._on_setting, Settings.names())
        self.settings.param.watch(self._sync_url, Settings.names())
        if self.compare:
            self._start_reference()
        self.timeseries.show_distance(self.compare)
        self.trajectories.show_reference(self.compare)
        self._ready = True
        self.reset()
        self._show_notice()
        pn.state.onload(self._on_load)

    @param.depends(*(p for p in VIEW_PARAMS if p != "tour_step"), watch=True)
    def _sync_view_url(self):
        self._sync_url()

    # -- the guided tour and projector mode ----------------------------------------
    @param.depends("tour_step", watch=True)
    def _show_tour_step(self):
        if self._layout is None:
            self._sync_url()
            return  # shown when the layout is built
        # the URL once, when the step is shown (its preset loaded): never a step with the
        # settings of the one before it
        self._url_paused = True
        try:
            # one message to the page: each change of a plot's or a panel's visibility
            # lays the whole page out again there (a step changes dozens)
            with pn.io.hold():
                shown = self.tour.show(self.tour_step)
        finally:
            self._url_paused = False
        self._sync_url()
        loc = pn.state.location
        if self.tour_step == 0 and loc is not None:
            # sent again even where the server's copy of the URL already has no step: a
            # page opened from a tour link could keep ?tour_step=N after End tour, so a
            # reload restarted the tour
            loc.param.trigger("search")
        if not shown:
            self.notice = (f"the tour has no step {self.tour_step} "
                           f"(it has {len(self.tour.steps)})")
            self._show_notice()

    @param.depends("projector", watch=True)
    def _toggle_projector(self):
        if self._layout is not None:
            self.projector_mode.apply(self.projector)

    # -- settings and the run ----------------------------------------------------
    def _on_setting(self, *events):
        """A setting changed: the simulation decides whether that restarts the run
        (:meth:`dynamics.Simulation.sync`); a restart resets the plots, a continued run
        shows the change on the current state. Settings changed together (a preset,
        pasted settings) restart the run once, when all are set (:meth:`changing`)."""
        if not self._ready:
            return
        if not self._from_preset and any(e.name == "model" for e in events):
            self._forget_preset()  # its caption and quench describe another model
        if any(e.name in ("beta", "gamma") for e in events):
            self.timeseries.guides.retune(self.settings.gamma / self.settings.beta, self.sim.t)
        if any(e.name == "model" for e in events) and (fitted := fit_real_heads(self.settings)):
            self.settings.param.update(**fitted)  # (their change restarts the run)
            return
        self._show_confinement()
        if self._batch:
            return
        try:
            restart = self.sim.sync() == "restart"
        except ValueError as err:  # a real head that does not exist, a refused sentence
            self.real_heads.refuse(events, err)
            return
        if self.pinned.restart_for_comparison() or restart:  # (asked at every change)
            self.reset()
            return
        self._refresh()

    def _refresh(self, *events):
        """Show the effect of a changed β, γ, … on the current state: while paused at
        once, while playing at the next tick (without waiting for the frame cap)."""
        if self.playing:
            self._urgent = True
            if self._flow_control and getattr(self._callback, "running", False):
                self.tick()  # a page's change: its frame now, not at the callback's next call
            return
        if not self._ready or self.sim.status != RUNNING:
            return
        frame = self.sim.frame()
        if frame_is_finite(frame, not_applicable(self.settings.model)):
            with pn.io.hold():
                self.heatmaps.update(frame, self._frame_id, self.sim.settings.beta)
            self._push_notebook()

    @param.depends("compare", watch=True)
    def _toggle_compare(self):
        if not self._ready:
            return
        if self.compare:
            self._start_reference()
        else:
            self.reference = self.reference_settings = None
        self.timeseries.show_distance(self.compare)
        self.trajectories.show_reference(self.compare)
        if not self._batch:
            self.reset()

    def _start_reference(self):
        self.reference_settings = self.settings.copy(model=COMPARISON_MODEL)
        self.reference = Simulation(self.reference_settings)

    def _sync_reference(self):
        values = self.settings.values()
        values["model"] = COMPARISON_MODEL
        changed = {k: v for k, v in values.items() if getattr(self.reference_settings, k) != v}
        if changed:
            self.reference_settings.param.update(**changed)

    @property
    def run_error(self) -> bool:
        """The notice shows an error of the run (the next restart clears it)."""
        return self._run_error

    def show_error(self, message: str) -> None:
        """``message`` in the page's notice, as an error of the run: the next restart
        clears it."""
        self.notice = message
        self._run_error = True
        self._show_notice()

    def reset(self) -> None:
        """Restart the run (and the comparison run) from the initial state."""
        if self._run_error:
            self._run_error = False
            self.notice = ""
        try:
            self.sim.reset()
        except ValueError as err:  # (settings changed together: a preset, pasted ones)
            fixed = fit_real_head(self.settings)
            if not fixed:
                raise
            self.real_heads.show_refusal("\n".join([f"Not applied: {err}", *fixed]))
            self.sim.reset()
        if self.reference is not None:
            self._sync_reference()
            self.reference.reset()
        n, d = self.sim.state.X.shape  # (a real sentence brings its own N and d)
        per_frame = 8 * (3 * n * n + 2 * n * d + 32)
        self.history = deque(maxlen=int(min(5000, max(50, HISTORY_BYTES // per_frame))))
        self._ticks.clear()
        self._restarted()  # (a run paused at its end plays again)
        # projector mode keeps the plots of the model shown: undone, then done again
        projecting = self.projector and self._layout is not None
        with pn.io.hold():
            if projecting:
                self.projector_mode.apply(False)
            self.timeseries.set_model(self.settings.model)
            zero = zero_text(self.settings.model)
            self.zero_line.param.update(object=zero, visible=bool(zero))
            self.heatmaps.set_model(self.settings.model)
            self.clustering.set_model(self.settings.model)
            self.timeseries.clear()
            self.trajectories.clear()
            first = self.sim.frame()
            self._norm0, self._runaway = first.diagnostics.get("feature_norm", math.nan), None
            self._show(first, self.reference.frame() if self.reference is not None else None)
            if projecting:
                self.projector_mode.apply(True)
        self._push_notebook()
        self._show_confinement()
        self.update_status(force=True)
        if self.pinned.runs:  # the ghosts on the new run's token axes, relabelled
            self.pinned.draw()

    def replay(self) -> None:
        """Run again from the initial state and play (the Replay button): a relaxation
        over in seconds can be shown again. A preset's quench that has happened is undone
        and armed again, so the replay shows it too."""
        fired, self._fired_quench = self._fired_quench, None
        with self.changing(preset=fired is not None):  # restarts the run once
            if fired is not None:
                quench, before, running = fired
                self.settings.param.update(**before)
                self._quench, self._running_preset = quench, running
        self.playing = True

    def _show_confinement(self, frame=None) -> None:
        """Show the confinement notice once the run's features run away
        (:func:`dynamics.models.part_one.runaway_notice`: k below 2√N‖M‖₂ and ‖X‖ at
        twice its start); ``frame``: a new frame (checked until the notice shows),
        None: the settings changed (checked anew on the last frame)."""
        if frame is None:
            self._runaway = None
            frame = self.history[-1] if self.history else None
        elif self._runaway is not None:
            return
        if frame is not None:
            M = getattr(self.sim.problem, "M", None)
            try:
                self._runaway = runaway_notice(
                    self.settings, self._norm0, frame.diagnostics.get("feature_norm", math.nan),
                    frame.t, M=M, n_tokens=frame.features.shape[0])
            except ValueError:  # (a real head that does not exist: refused by the run)
                self._runaway = None
        text = self._runaway or ""
        if self.confinement.object != text:
            self.confinement.object = text
        self.confinement.visible = bool(text)
