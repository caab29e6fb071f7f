"""Settings in and out of the dashboard: the URL query, presets and pasted JSON.

:class:`SettingsIO` is the part of :class:`app.dashboard.Dashboard` that takes settings
from outside and refuses bad ones whole, with a message: a URL query
(:mod:`app.urlstate`), a preset (:mod:`app.presets`, with its caption, an in-app link to
its model's section of the Theory page and an optional quench), or a pasted JSON object.
Every source is held to the same validation (``Settings.check``) and to the main tab's
one rule on models (:func:`app.models.main_model_problem`).
"""

from __future__ import annotations

import json

import panel as pn
import param

from dynamics import Settings

from . import presets, urlstate
from .controls import MAX_PASTE
from .models import main_model_problem, spec

#: Dashboard parameters that are also synced to the URL.
VIEW_PARAMS = ("steps_per_frame", "compare")


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


class SettingsIO(param.Parameterized):
    """URL query, presets and pasted settings of the dashboard.

    A mixin of :class:`app.dashboard.Dashboard`, which provides ``settings``,
    ``caption``, ``reset()`` and ``_ready``.
    """

    preset = param.Selector(default=None, objects=[], allow_None=True,
                            doc="A preset tied to a statement of the Theory page.")
    notice = param.String(default="", doc="Message for the user (bad preset or URL, errors).")

    def _init_presets(self) -> list[str]:
        """Load the presets into the menu; returns messages (presets not available)."""
        self._presets, notices = [], []
        self._quench = None
        try:
            self._presets = presets.load_presets()
        except (OSError, ValueError) as err:
            notices.append(f"presets not available: {err}")
        self._preset_names = [presets.display_name(i, p) for i, p in enumerate(self._presets)]
        self.param.preset.objects = list(self._preset_names)
        if self._presets and self.preset is None:
            self.preset = self._preset_names[0]
        return notices

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

    # -- presets -------------------------------------------------------------
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
        with param.parameterized.batch_call_watchers(self.settings):
            self.settings.param.update(**values)
        self._quench = dict(preset["quench"]) if "quench" in preset else None
        self.compare = preset.get("compare", False)
        self.caption.object = (f"**{preset['name']}** — {preset['caption']}  \n"
                               f"{theory_link(values['model'])}")
        self.notice = ""
        self._show_notice()
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

    # -- pasted JSON -----------------------------------------------------------
    def settings_json(self) -> str:
        """The current settings as the JSON object :meth:`apply_settings_json` takes."""
        return json.dumps(self.settings.values(), indent=1)

    def apply_settings_json(self, text: str) -> bool:
        """Apply pasted settings (a JSON object of every setting); refuse it whole if invalid.

        The text is parsed with ``json.loads`` (data only, nothing is evaluated) and
        checked by ``Settings.check`` and the main tab's rule on models: every missing,
        unknown, mistyped or out-of-range entry is listed in the notice and nothing
        changes.

        Parameters
        ----------
        text : str
            At most :data:`app.controls.MAX_PASTE` characters.

        Returns
        -------
        bool
            Whether the settings were applied (the run then restarts).
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
                problem = None if problems else main_model_problem(values["model"])
                if problem:
                    problems.append(problem)
        if problems:
            self.notice = "pasted settings not applied:\n" + "\n".join(f"- {p}" for p in problems)
            return False
        self._quench = None
        with param.parameterized.batch_call_watchers(self.settings):
            self.settings.param.update(**values)
        self.notice = ""
        self.reset()
        return True

    @param.depends("notice", watch=True)
    def _show_notice(self):
        if self._ready:
            self.alert.object = self.notice.replace("\n", "  \n")
            self.alert.visible = bool(self.notice)
