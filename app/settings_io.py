"""Settings in and out of the dashboard: the URL query, presets and pasted JSON.

:class:`SettingsIO` is the part of :class:`app.dashboard.Dashboard` that takes settings
from outside and refuses bad ones whole, with a message: a URL query
(:mod:`app.serving.urlstate`), a preset (:mod:`app.presets`, with its caption, an in-app link to
its model's section of the Theory page and an optional quench), or a pasted JSON object.
Every source is held to the same validation (``Settings.check``) and to the main tab's
one rule on models (:func:`app.models.main_model_problem`).
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import panel as pn
import param

from dynamics import Settings

from . import presets
from .mainview.controls import MAX_PASTE, shown_settings
from .mainview.head_choice import fit_real_head
from .models import applies, main_model_problem, spec
from .serving import server, urlstate

#: Dashboard parameters that are also synced to the URL.
VIEW_PARAMS = ("steps_per_frame", "max_fps", "compare", "tour_step", "projector")
#: What the preset menu shows when the settings are no preset's (issue #27, item 7).
CUSTOM = "— your own settings —"


def theory_link(model: str) -> str:
    """An in-app link to a model's section of the Theory page.

    Parameters
    ----------
    model : str
        A registered model.

    Returns
    -------
    str
        Markdown ``[Theory page: <title> ▸](#<section>)``.
    """
    s = spec(model)
    return f"[Theory page: {s.title} ▸](#{s.section})"


def used_settings(settings: Settings) -> dict:
    """The settings the selected model and path use, in the order of the controls.

    Parameters
    ----------
    settings : dynamics.Settings

    Returns
    -------
    dict
        ``{name: value}`` of every shown setting that applies
        (:func:`app.models.applies`): what the settings box shows.
    """
    return {k: getattr(settings, k) for k in shown_settings() if applies(k, settings)}


def parse_pasted(text, current: Settings) -> tuple[dict, tuple | None, list[str]]:
    """Pasted settings checked against the current ones.

    Parameters
    ----------
    text : str
        A JSON object of some settings.
    current : dynamics.Settings
        The settings the keys not given keep.

    Returns
    -------
    values : dict
        The settings to apply: the given ones the resulting model uses.
    unused : tuple or None
        ``(what, names)``: the given settings the resulting model (``what``, e.g.
        ``"the Canonical model"``) does not use and whose value differs from the current
        one (not applied); None when there are none.
    problems : list of str
        Why nothing can be applied (empty when the text is fine): not JSON, not an
        object, nothing given, unknown, mistyped or out-of-range entries, a model the
        main tab does not run.
    """
    if not isinstance(text, str) or not text.strip():
        return {}, None, ["nothing pasted: paste a JSON object of settings"]
    if len(text) > MAX_PASTE:
        return {}, None, [f"the text is too long ({len(text)} characters, at most {MAX_PASTE})"]
    try:
        mapping = json.loads(text)
    except (ValueError, RecursionError) as err:
        return {}, None, [f"not valid JSON: {err}"]
    if mapping == {}:
        return {}, None, ["no settings given: the object is empty"]
    values, problems = Settings.check(mapping)
    problem = main_model_problem(values["model"]) if "model" in values else None
    if problem:
        problems.append(problem)
    if problems:
        return {}, None, problems
    # the settings that decide which others apply (a real head's weights set N and d)
    target = current.copy(**{k: v for k, v in values.items()
                             if k in ("model", "path", "weights", "heads")})
    missing = fit_real_head(current.copy(**values), apply=False)
    if missing:  # a real head that does not exist (layer 3 of the shipped file)
        return {}, None, missing
    unused = [k for k in values if not applies(k, target)]
    changed = [k for k in unused if values[k] != getattr(current, k)]
    what = f"the {spec(target.model).title} model"
    if "path" in spec(target.model).reads():
        what += f" on the {target.path} path"
    return ({k: v for k, v in values.items() if k not in unused},
            (what, tuple(changed)) if changed else None, [])


class SettingsIO(param.Parameterized):
    """URL query, presets and pasted settings of the dashboard.

    A mixin of :class:`app.dashboard.Dashboard`, which provides ``settings``,
    ``caption``, ``reset()`` and ``_ready``.
    """

    preset = param.Selector(
        default=CUSTOM, objects=[CUSTOM], allow_None=True,
        doc="The preset that runs (a statement of the Theory page), or CUSTOM: choosing "
            "one loads it; a setting changed by hand away from it shows CUSTOM.")
    notice = param.String(default="", doc="Message for the user (bad preset or URL, errors).")
    paste_message = param.String(
        default="", doc="What became of the pasted settings: shown under the settings box, "
                        "where the hand is (issue #27, item 9), not at the top of the page.")

    _from_preset = False  # the settings being changed are a preset's (its caption stays)
    _fired_quench = None  # (quench, the values it changed, the preset running) of a
    # preset's quench that ran: Replay undoes it and arms it again
    _showing_preset = False  # the menu is being set to what runs (nothing to load)
    _running_preset = None  # (name, its used settings, compare) of the preset loaded

    def _init_presets(self) -> list[str]:
        """Load the presets into the menu; returns messages (presets not available)."""
        self._presets, notices = [], []
        self.paste_note = pn.pane.Alert("", alert_type="warning", visible=False,
                                        sizing_mode="stretch_width", margin=(0, 10))
        self._quench = None
        try:
            self._presets = presets.load_presets()
        except (OSError, ValueError) as err:
            notices.append(f"presets not available: {err}")
        self._preset_names = [presets.display_name(i, p) for i, p in enumerate(self._presets)]
        self.param.preset.objects = [CUSTOM, *self._preset_names]
        self.preset = CUSTOM
        self.settings.param.watch(self._show_running_preset, Settings.names())
        self.param.watch(self._show_running_preset, "compare")
        return notices

    def _show_preset(self, name: str) -> None:
        """Show ``name`` in the preset menu without loading it."""
        if self.preset != name:
            self._showing_preset = True
            try:
                self.preset = name
            finally:
                self._showing_preset = False

    def _show_running_preset(self, *events) -> None:
        """A setting changed: the menu shows the preset loaded while the settings are still
        its own (a quench's change included), CUSTOM once one is changed by hand."""
        if self._from_preset or self._running_preset is None:
            return
        name, used, compare = self._running_preset
        if used_settings(self.settings) != used or self.compare != compare:
            self._running_preset = None
            self.run_end = None  # the preset's end is its own: your settings stream on
            self._show_preset(CUSTOM)

    @param.depends("preset", watch=True)
    def _on_preset_chosen(self) -> None:
        """A preset chosen in the menu is loaded at once (no separate button)."""
        if self._showing_preset or self.preset in (None, CUSTOM):
            return
        server.locked(self.load_preset)()

    @contextmanager
    def changing(self, preset: bool = False):
        """Change several settings inside the block; the run restarts once, after it.

        The dashboard's watcher of the settings waits (``_batch``) until every setting
        of a preset or of pasted settings is set, so the run restarts from the new
        settings once and the plots are reset once. ``preset``: the change is a preset's
        (its caption stays; a change of the model by any other source removes it).
        """
        self._batch, self._from_preset = True, preset
        try:
            with param.parameterized.batch_call_watchers(self.settings):
                yield
        finally:
            self._batch = self._from_preset = False
        self.reset()

    # -- URL -----------------------------------------------------------------
    def query_parameters(self) -> dict:
        """The parameters a URL query may set: ``{name: param.Parameter}`` of the settings
        (but those never in a URL, :data:`app.serving.urlstate.NOT_IN_URL`) and of
        :data:`VIEW_PARAMS`."""
        ps = {k: self.settings.param[k] for k in Settings.names()
              if k not in urlstate.NOT_IN_URL}
        ps.update({k: self.param[k] for k in VIEW_PARAMS})
        return ps

    def apply_query(self, query) -> list[str]:
        """Apply a URL query (mapping); returns the messages about refused entries."""
        values, messages = urlstate.parse_query(query, self.query_parameters())
        view = {k: values.pop(k) for k in VIEW_PARAMS if k in values}
        self.settings.param.update(**values)
        self.param.update(**view)
        return messages

    @property
    def query(self) -> dict:
        """The non-default settings as a URL query mapping."""
        return urlstate.to_query((self.settings, self), list(self.query_parameters()))

    _url_paused = False  # a tour step is being shown: the URL follows once it is

    def _sync_url(self, *events):
        loc = pn.state.location if self._ready and not self._url_paused else None
        if loc is not None:
            loc.search = urlstate.search_string(self.query)

    # -- presets -------------------------------------------------------------
    @property
    def presets(self) -> tuple[dict, ...]:
        """The presets of the menu, in its order (:func:`app.presets.load_presets`);
        :meth:`load_preset` takes one."""
        return tuple(self._presets)

    @property
    def quench(self) -> dict | None:
        """The quench of the preset loaded that has still to happen (a copy of its
        ``"quench"`` entry, applied once the run reaches its ``at_t``), or None."""
        return None if self._quench is None else dict(self._quench)

    def load_preset(self, preset: dict | None = None) -> bool:
        """Apply ``preset`` (default: the selected one); refuse it whole if invalid.

        Parameters
        ----------
        preset : dict, optional
            ``{"name", "caption", "settings"}`` with optional ``"quench"`` and
            ``"compare"`` (see :mod:`app.presets`).

        Returns
        -------
        bool
            Whether it was applied; if not, :attr:`notice` lists every problem.
        """
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
        self.paste_message = ""  # (said of settings no longer shown)
        with self.changing(preset=True):
            self.settings.param.update(**values)
            self.compare = preset.get("compare", False)
            self._quench = dict(preset["quench"]) if "quench" in preset else None
            self._fired_quench = None
            self.run_end = preset.get("t_end")
            self.caption.object = (f"**{preset['name']}** — {preset['caption']}  \n"
                                   f"{theory_link(values['model'])}")
            self.notice = ""
            self._show_notice()
        name = preset["name"]  # the menu shows it while its settings run
        self._running_preset = (name, used_settings(self.settings), self.compare)
        self._show_preset(name if name in self._preset_names else CUSTOM)
        return True

    def _forget_preset(self) -> None:
        """The model changed by hand: the preset's caption and pending quench go."""
        self.caption.object = ""
        self._quench = self._fired_quench = None
        self.run_end = None

    def _apply_quench(self):
        q = self._quench
        if q is not None and self.sim.t >= q["at_t"] - 0.5 * self.sim.settings.dt:
            # forgotten first: the change may run a frame at once (``_refresh``), which
            # applied and logged the quench a second time, a frame later
            self._quench, t = None, self.sim.t
            changes = presets.quench_changes(q)
            running, self._running_preset = self._running_preset, None
            self._fired_quench = (q, {k: getattr(self.settings, k) for k in changes}, running)
            self.settings.param.update(**changes)
            if running is not None:  # the quench is the preset's own: it still runs
                self._running_preset = (running[0], used_settings(self.settings), running[2])
            text = ", ".join(f"{k} → {v:g}" for k, v in changes.items())
            self.caption.object += f"  \n*Quench at t = {t:.3g}: {text}*"

    def _quench_steps(self, n: int) -> int | None:
        """The steps of a frame of ``n`` before a pending quench falling inside it (the
        frame stops there, so the quench lands on its time), or None."""
        q = self._quench
        if q is None:
            return None
        k = round((q["at_t"] - self.sim.t) / self.sim.settings.dt)
        return k if 0 < k < n else None

    # -- pasted JSON -----------------------------------------------------------
    def settings_json(self) -> str:
        """The current settings as the JSON object :meth:`apply_settings_json` takes: the
        settings the selected model (and path) uses, in the order of the controls."""
        return json.dumps(used_settings(self.settings), indent=1)

    def apply_settings_json(self, text: str) -> bool:
        """Apply pasted settings (a JSON object of some settings) and restart the run.

        Only the keys given change; the others keep their current values. The text is
        parsed with ``json.loads`` (data only, nothing is evaluated) and checked by
        ``Settings.check`` and the main tab's rule on models (:func:`parse_pasted`): an
        unknown, mistyped or out-of-range entry refuses the whole text, every problem
        listed in the notice. A setting the resulting model does not use is not applied,
        and named in the notice when its value would have changed.

        Parameters
        ----------
        text : str
            At most :data:`app.mainview.controls.MAX_PASTE` characters.

        Returns
        -------
        bool
            Whether the settings were applied (the run then restarts).
        """
        values, unused, problems = parse_pasted(text, self.settings)
        if problems:
            self.paste_message = ("pasted settings not applied:\n"
                                  + "\n".join(f"- {p}" for p in problems))
            return False
        self._quench = self._fired_quench = None
        self.run_end = None
        with self.changing():
            self.settings.param.update(**values)
        self.paste_message = (f"pasted settings applied; not applied, as {unused[0]} does not "
                              f"use them: {', '.join(unused[1])}" if unused else "")
        return True

    @param.depends("paste_message", watch=True)
    def _show_paste_message(self):
        text = self.paste_message
        self.paste_note.alert_type = "warning" if text.startswith("pasted settings not") \
            else "info"
        self.paste_note.object = text.replace("\n", "  \n")
        self.paste_note.visible = bool(text)

    @param.depends("notice", watch=True)
    def _show_notice(self):
        if self._ready:
            self.alert.object = self.notice.replace("\n", "  \n")
            self.alert.visible = bool(self.notice)
