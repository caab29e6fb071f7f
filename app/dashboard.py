"""The dashboard: a ``pn.viewable.Viewer`` holding the run and its periodic callback.

One :class:`dynamics.Simulation` (plus, in comparison mode, a second one with
``model="reduced"``) is advanced by one periodic callback per browser session;
each tick advances ``steps_per_frame`` steps, builds one frame and pushes it into
the Bokeh ``ColumnDataSource``s of the panels under one document hold.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import deque
from types import MappingProxyType

import numpy as np
import panel as pn
import param

from dynamics import (
    DIVERGED,
    FAILED,
    NOT_APPLICABLE,
    PART_I_MODELS,
    RUNNING,
    Settings,
    Simulation,
)

from . import export, presets, server, urlstate
from .controls import MAX_PASTE, Controls
from .explain import Explanation
from .heatmaps import Heatmaps
from .resources import read_asset
from .timeseries import TimeSeries
from .trajectories import Trajectories

# The server plumbing lives in app.server; these names stay readable here (the browser
# tests count app.dashboard.live_callbacks() and call app.dashboard._return_memory()).
running_dashboards = server.running_dashboards
live_callbacks = server.live_callbacks
_return_memory = server.return_memory

#: Stylesheet of the text panes.
CSS = read_asset("style.css")
#: Memory budget of the recorded history of one session (bytes).
HISTORY_BYTES = 20_000_000
#: Frames sent to the browser and not yet acknowledged before a tick is skipped (each
#: queued frame delays what a slider change shows: 2 keeps the page busy and the
#: slider latency near one frame time plus a tick).
MAX_IN_FLIGHT = 2
#: Seconds without acknowledgement after which frames are sent anyway.
ACK_TIMEOUT = 1.0
#: Seconds between status-line refreshes while playing (a DOM change costs the page a restyle).
STATUS_EVERY = 1.0
STATUS_STYLE = MappingProxyType({
    "font-family": "monospace", "font-size": "13px", "background": "#f4f6f8",
    "border-left": "4px solid #2c7fb8", "padding": "0 8px"})
STOPPED_STYLE = MappingProxyType(
    {**STATUS_STYLE, "background": "#fdecea", "border-left": "4px solid #d7301f"})
#: Dashboard parameters that are also synced to the URL.
VIEW_PARAMS = ("steps_per_frame", "compare")
#: Diagnostics that are NaN ("not applicable") for some model.
_OPTIONAL = frozenset(name for names in NOT_APPLICABLE.values() for name in names)


def _frame_is_finite(frame) -> bool:
    """Whether every array and every applicable diagnostic of ``frame`` is finite."""
    arrays = (frame.features, frame.momenta, frame.attention, frame.softmax)
    if not all(np.all(np.isfinite(a)) for a in arrays):
        return False
    return all(math.isfinite(v) for k, v in frame.diagnostics.items()
               if k not in _OPTIONAL)


def _average(old: float, new: float) -> float:
    """Exponential moving average (the first value is taken as is)."""
    return 0.9 * old + 0.1 * new if old else new


class Dashboard(pn.viewable.Viewer):
    """Live dashboard of nonequilibrium attention (MODEL.md Part I)."""

    settings = param.ClassSelector(class_=Settings, doc="The settings of the run.")
    playing = param.Boolean(default=True, doc="Advance the run in the periodic callback.")
    steps_per_frame = param.Integer(
        default=5, bounds=(1, 1000), softbounds=(1, 100),
        doc="Integrator steps per displayed frame.")
    compare = param.Boolean(
        default=False,
        doc="Run the reduced (softmax-slaved) model beside the selected one (restarts the run).")
    preset = param.Selector(default=None, objects=[], allow_None=True,
                            doc="A preset tied to a statement of MODEL.md.")
    period = param.Integer(default=10, bounds=(5, 2000),
                           doc="Milliseconds between calls of the periodic callback.")
    max_fps = param.Number(default=40.0, bounds=(1.0, 120.0),
                           doc="Most frames per second the periodic callback sends.")
    notice = param.String(default="", doc="Message for the user (bad preset or URL, errors).")

    _ready = False  # True once every panel exists (watchers wait for it)
    _run_error = False  # the notice shows an error of the run (cleared by Reset)

    def __init__(self, query=None, **params):
        if params.get("settings") is None:
            params["settings"] = Settings()
        super().__init__(**params)
        self._callback = None
        self._flow_control = self._notebook = False
        self._session_context = None
        self._frame_id = self._acked = 0
        self._ack_time = self._last_frame = 0.0
        self._urgent = False  # a setting changed while playing: show it at the next tick
        self._presets, notices = [], []
        try:
            self._presets = presets.load_presets()
        except (OSError, ValueError) as err:
            notices.append(f"presets not available: {err}")
        self._preset_names = [presets.display_name(i, p) for i, p in enumerate(self._presets)]
        self.param.preset.objects = list(self._preset_names)
        if self._presets and self.preset is None:
            self.preset = self._preset_names[0]
        if query is None and pn.state.curdoc is not None and pn.state.curdoc.session_context:
            query = pn.state.session_args
        if query:
            notices += self.apply_query(query)
        self.notice = "\n".join(notices)
        self._quench = None
        self._ticks = deque(maxlen=30)
        self._last_status = 0.0
        self.tick_ms = self.compute_ms = 0.0
        self.sim = Simulation(self.settings)
        self.reference = None
        self.reference_settings = None

        self.heatmaps = Heatmaps(self.settings.n_tokens)
        self.timeseries = TimeSeries()
        self.trajectories = Trajectories()
        self.explanation = Explanation(settings=self.settings, stylesheets=[CSS])
        self.controls = Controls(self)
        self.status = pn.pane.Markdown("", styles=dict(STATUS_STYLE), sizing_mode="stretch_width",
                                       margin=(0, 10))
        self.alert = pn.pane.Alert("", alert_type="warning", visible=False,
                                   sizing_mode="stretch_width")
        self.caption = pn.pane.Markdown("", css_classes=["caption"], stylesheets=[CSS],
                                        sizing_mode="stretch_width")
        self.downloads = export.download_buttons(self)
        self.settings.param.watch(self._on_setting, Settings.names())
        self.settings.param.watch(self._sync_url, Settings.names())
        if self.compare:
            self._start_reference()
        self.timeseries.show_distance(self.compare)
        self._layout = None
        self._ready = True
        self.reset()
        self._show_notice()
        pn.state.onload(self._on_load)

    # -- URL -----------------------------------------------------------------
    def _query_parameters(self) -> dict:
        ps = {k: self.settings.param[k] for k in Settings.names()}
        ps.update({k: self.param[k] for k in VIEW_PARAMS})
        return ps

    def apply_query(self, query) -> list[str]:
        """Apply a URL query (mapping); returns the messages about refused entries."""
        values, messages = urlstate.parse_query(query, self._query_parameters())
        view = {k: values.pop(k) for k in VIEW_PARAMS if k in values}
        self.settings.param.update(**values)
        self.param.update(**view)
        return messages

    @property
    def query(self) -> dict:
        """The non-default settings as a URL query mapping."""
        return urlstate.to_query((self.settings, self), list(self._query_parameters()))

    def _sync_url(self, *events):
        loc = pn.state.location if self._ready else None
        if loc is not None:
            loc.search = urlstate.search_string(self.query)

    @param.depends(*VIEW_PARAMS, watch=True)
    def _sync_view_url(self):
        self._sync_url()

    # -- run control -----------------------------------------------------------
    def _on_setting(self, *events):
        """A setting changed: the simulation decides whether that restarts the run
        (:meth:`dynamics.Simulation.sync`); a restart resets the plots, a continued run
        shows the change on the current state."""
        if not self._ready:
            return
        if self.sim.sync() == "restart":
            self.reset()
            return
        self._refresh()

    def _refresh(self, *events):
        """Show the effect of a changed β, γ, … on the current state: while paused at
        once, while playing at the next tick (without waiting for the frame cap)."""
        if self.playing:
            self._urgent = True
            return
        if not self._ready or self.sim.status != RUNNING:
            return
        frame = self.sim.frame()
        if _frame_is_finite(frame):
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
        self.reset()

    def _start_reference(self):
        self.reference_settings = self.settings.copy(model="reduced")
        self.reference = Simulation(self.reference_settings)

    def _sync_reference(self):
        values = self.settings.values()
        values["model"] = "reduced"
        changed = {k: v for k, v in values.items() if getattr(self.reference_settings, k) != v}
        if changed:
            self.reference_settings.param.update(**changed)

    def reset(self) -> None:
        """Restart the run (and the comparison run) from the initial state."""
        if self._run_error:
            self._run_error = False
            self.notice = ""
        self.sim.reset()
        if self.reference is not None:
            self._sync_reference()
            self.reference.reset()
        n, d = self.settings.n_tokens, self.settings.dim
        per_frame = 8 * (3 * n * n + 2 * n * d + 32)
        self.history = deque(maxlen=int(min(5000, max(50, HISTORY_BYTES // per_frame))))
        self.timeseries.set_model(self.settings.model)
        self._ticks.clear()
        with pn.io.hold():
            self.timeseries.clear()
            self.trajectories.clear()
            self._show(self.sim.frame(),
                       self.reference.frame() if self.reference is not None else None)
        self._push_notebook()
        self._update_status(force=True)

    def step_once(self) -> None:
        """Advance one frame (used by the Step button; works while paused)."""
        self.advance_frame()

    def tick(self) -> None:
        """The periodic callback: one frame, unless it is too early or the browser is behind.

        The callback runs every ``period`` ms but sends at most ``max_fps`` frames/s.

        With a browser attached (flow control on), at most ``MAX_IN_FLIGHT`` frames
        may be sent and not yet acknowledged by the page, so a slow browser lowers the
        frame rate instead of building an ever-growing backlog of messages.
        """
        now = time.perf_counter()
        # half a callback period of slack, so a 40 frames/s cap is not rounded down
        # to the callback grid (10 ms period: 40 ms = 25 frames/s)
        slack = self.period / 2000
        urgent = self._urgent  # a changed setting: one frame skips the cap and one
        # place of the in-flight limit, so it does not wait behind the frame rate
        if (not urgent and self._callback is not None
                and now - self._last_frame < 1.0 / self.max_fps - slack):
            return
        if self._flow_control:
            session = getattr(self._session_context, "session", None)
            if session is not None and session.connection_count == 0:
                return  # the page is gone: send nothing until the session ends
            behind = self._frame_id - self._acked
            if behind > MAX_IN_FLIGHT + urgent and now - self._ack_time < ACK_TIMEOUT:
                return
        self._urgent = False
        self._last_frame = now
        self.advance_frame()

    def _on_ack(self, attr, old, new):
        if new:
            self._acked = max(self._acked, int(new[0]))
            self._ack_time = time.perf_counter()

    def advance_frame(self) -> None:
        """One frame: advance ``steps_per_frame`` steps and update every plot."""
        if self.sim.status != RUNNING:
            self.playing = False
            self._update_status(force=True)
            return
        start = time.perf_counter()
        try:
            self._apply_quench()
            n = self.steps_per_frame
            self.sim.advance(n)
            frame = self.sim.frame()
            ref = None
            if self.reference is not None:
                self._sync_reference()
                self.reference.advance(n)
                ref = self.reference.frame()
            computed = time.perf_counter()
            with pn.io.hold():
                self._show(frame, ref)
            self._push_notebook()
        except Exception as err:  # one session's run stops; the server goes on
            self.playing = False
            self.sim.status = FAILED
            self.sim.message = (f"the run stopped at t = {self.sim.t:.4g} with an error: "
                                f"{type(err).__name__}: {err} (Reset to start again)")
            self._run_error = True
            self.notice = self.sim.message
            self._update_status(force=True)
            return
        now = time.perf_counter()
        self.compute_ms = _average(self.compute_ms, 1e3 * (computed - start))
        self.tick_ms = _average(self.tick_ms, 1e3 * (now - start))
        self._ticks.append(now)
        if self.sim.status != RUNNING:
            self.playing = False
        self._update_status(force=self.sim.status != RUNNING)

    def _show(self, frame, ref=None) -> None:
        if not _frame_is_finite(frame):
            self.sim.status = DIVERGED
            self.sim.message = (f"diverged at t = {frame.t:.4g}: non-finite diagnostics; "
                                "the run stopped (Reset to start again)")
            return
        distance = None
        if ref is not None and _frame_is_finite(ref) and ref.features.shape == frame.features.shape:
            distance = float(np.linalg.norm(frame.features - ref.features))
        else:
            ref = None
        if self.history and frame.t < self.history[-1].t:  # the run restarted
            self.timeseries.clear()
            self.trajectories.clear()
            self.history.clear()
        self.history.append(frame)
        self._frame_id += 1
        self.heatmaps.update(frame, self._frame_id, self.sim.settings.beta)
        # While playing smoothly, time series go in batches; otherwise at once.
        batched = self.playing and self.sim.status == RUNNING and self._flow_control
        self.timeseries.update(frame, distance, flush=not batched)
        self.trajectories.update(frame, ref)

    # -- presets -----------------------------------------------------------
    def load_preset(self, preset: dict | None = None) -> bool:
        """Apply ``preset`` (default: the selected one); refuse it whole if invalid."""
        if preset is None:
            preset = next((p for p, name in zip(self._presets, self._preset_names, strict=True)
                           if name == self.preset), None)
            if preset is None:
                self.notice = "no preset selected"
                self._show_notice()
                return False
        errors = presets.validate(preset)
        if errors:
            name = preset.get("name", "?") if isinstance(preset, dict) else "?"
            self.notice = f"preset {name!r} not loaded:\n" + "\n".join(f"- {e}" for e in errors)
            self._show_notice()
            return False
        values = presets.preset_values(preset)
        with param.parameterized.batch_call_watchers(self.settings):
            self.settings.param.update(**values)
        self._quench = dict(preset["quench"]) if "quench" in preset else None
        self.compare = preset.get("compare", False)
        self.caption.object = f"**{preset['name']}** — {preset['caption']}"
        self.notice = ""
        self._show_notice()
        self.reset()
        return True

    def settings_json(self) -> str:
        """The current settings as the JSON object :meth:`apply_settings_json` takes."""
        return json.dumps(self.settings.values(), indent=1)

    def apply_settings_json(self, text: str) -> bool:
        """Apply pasted settings (a JSON object of every setting); refuse it whole if invalid.

        The text is parsed with ``json.loads`` (data only, nothing is evaluated) and
        checked by ``Settings.check``: every missing, unknown, mistyped or out-of-range
        entry is listed in the notice and nothing changes.
        """
        problems = []
        if not isinstance(text, str) or not text.strip():
            problems.append("nothing pasted: paste a JSON object of settings")
        elif len(text) > MAX_PASTE:
            problems.append(f"the text is too long ({len(text)} characters, at most {MAX_PASTE})")
        else:
            try:
                mapping = json.loads(text)
            except (ValueError, RecursionError) as err:
                problems.append(f"not valid JSON: {err}")
            else:
                values, problems = Settings.check(mapping, require_all=True)
                if not problems and values["model"] not in PART_I_MODELS:
                    problems.append(f"model must be one of {', '.join(PART_I_MODELS)} on this "
                                    f"tab, got {values['model']!r}")
        if problems:
            self.notice = "pasted settings not applied:\n" + "\n".join(f"- {p}" for p in problems)
            return False
        self._quench = None
        with param.parameterized.batch_call_watchers(self.settings):
            self.settings.param.update(**values)
        self.notice = ""
        self.reset()
        return True

    def _apply_quench(self):
        q = self._quench
        if q is not None and self.sim.t >= q["at_t"] - 1e-12:
            changes = {k: v for k, v in q.items() if k != "at_t"}
            self.settings.param.update(**changes)
            self._quench = None
            text = ", ".join(f"{k} → {v:g}" for k, v in changes.items())
            self.caption.object += f"  \n*Quench at t = {self.sim.t:.3g}: {text}*"

    # -- status --------------------------------------------------------------
    @property
    def frames_per_second(self) -> float:
        if len(self._ticks) < 2:
            return 0.0
        return (len(self._ticks) - 1) / max(self._ticks[-1] - self._ticks[0], 1e-9)

    def _update_status(self, force=False):
        now = time.perf_counter()
        if not force and now - self._last_status < STATUS_EVERY:
            return
        self._last_status = now
        fps = self.frames_per_second
        sim = self.sim
        parts = [f"**t = {sim.t:.3f}**", f"{fps:.1f} frames/s",
                 f"{fps * self.steps_per_frame:.0f} steps/s",
                 f"server {self.tick_ms:.1f} ms/tick ({self.compute_ms:.1f} ms simulation)",
                 f"model **{self.settings.model}**, N = {self.settings.n_tokens}, "
                 f"d = {self.settings.dim}"]
        if sim.status == RUNNING:
            parts.append("▶ playing" if self.playing else "❚❚ paused")
        text = " · ".join(parts)
        if sim.status != RUNNING:
            text += f"\n\n⚠ **{sim.status}**: {sim.message}"
        self.status.object = text
        style = STATUS_STYLE if sim.status == RUNNING else STOPPED_STYLE
        if self.status.styles != style:
            self.status.styles = dict(style)

    @param.depends("notice", watch=True)
    def _show_notice(self):
        if self._ready:
            self.alert.object = self.notice.replace("\n", "  \n")
            self.alert.visible = bool(self.notice)

    # -- periodic callback -----------------------------------------------------
    def _on_load(self):
        """Start this session's periodic callback (server or Jupyter kernel)."""
        doc = pn.state.curdoc
        if doc is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return  # a plain script or a test: drive the run with tick()
            self._notebook = True  # Jupyter: Bokeh model changes are pushed by hand
        elif doc.session_context:
            # Server session: the page acknowledges frames (flow control).
            self._flow_control = True
            self._session_context = doc.session_context
            self._ack_time = time.perf_counter()
            self.heatmaps.attention.on_change("tags", self._on_ack)
            pn.state.on_session_destroyed(self._on_session_destroyed)
            server.install_closed_socket_filter()
        self._callback = pn.state.add_periodic_callback(
            self.tick, period=self.period, start=self.playing)
        server.register_session(self)

    @property
    def periodic_callback(self):
        """This session's periodic callback (None before the page loaded and after it
        closed; the registry of :mod:`app.server` reads it)."""
        return self._callback

    def _push_notebook(self):
        if self._notebook and self._layout is not None:
            pn.io.push_notebook(self._layout)

    def _on_session_destroyed(self, session_context):
        """The page is gone for good: stop the callback and drop the run."""
        if self._callback is not None:
            self._callback.stop()
            self._callback = None
        server.forget_session(self)
        self._session_context = None
        server.release_links(self._layout)  # its widgets' JS links would keep it alive
        self.reference = None
        self.history.clear()
        server.schedule_memory_return()

    @param.depends("playing", watch=True)
    def _toggle_playing(self):
        if not self._ready:
            return
        if not self.playing:
            self.timeseries.flush()
        cb = self._callback
        if cb is not None:
            if self.playing and not cb.running:
                cb.start()
            elif not self.playing and cb.running:
                cb.stop()
        self._update_status(force=True)

    # -- layout --------------------------------------------------------------
    def _inertial_lab(self):
        try:
            from .inertial_lab import InertialLab
        except ImportError:
            return pn.pane.Markdown(
                "### Inertial attention lab\nThe inertial (momentum) attention lab of "
                "MODEL.md Part II is not installed yet (`app/inertial_lab.py`).")
        try:
            return InertialLab()
        except Exception as err:  # the main tab keeps working whatever the lab does
            return pn.pane.Alert(f"The inertial lab failed to start: {type(err).__name__}: {err}",
                                 alert_type="danger")

    def __panel__(self):
        if self._layout is None:
            self._layout = self._build_layout()
        return self._layout

    def _build_layout(self):
        ts = self.timeseries
        plots = pn.Column(
            self.status, self.alert, self.caption,
            pn.Row(self.heatmaps, self.trajectories),
            ts,
            pn.Row(pn.pane.Bokeh(ts.fig_distance), pn.Column(self.explanation, width=700)),
            sizing_mode="stretch_width",
        )
        sidebar = pn.Column(
            self.controls,
            pn.widgets.Checkbox.from_param(ts.param.log_kl, label="Logarithmic KL axis"),
            self.downloads, width=320,
        )
        part_one = pn.Row(sidebar, plots, sizing_mode="stretch_width")
        # The lab is built when its tab is first opened: a session costs the server
        # (and the page) only what it shows.
        lab = pn.Column(sizing_mode="stretch_width")
        tabs = pn.Tabs(("Nonequilibrium attention", part_one), ("Inertial lab", lab))

        def build_lab(event):
            if event.new == 1 and not len(lab):
                lab[:] = [self._inertial_lab()]

        tabs.param.watch(build_lab, "active")
        return pn.Column(
            pn.pane.Markdown(
                "## Nonequilibrium attention: Fisher–Rao relaxation and Hamiltonian tokens",
                margin=(0, 10)),
            tabs,
            sizing_mode="stretch_width",
        )
