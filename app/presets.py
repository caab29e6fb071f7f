"""Presets: named settings tied to statements of the Theory page
(``assets/presets/attention.json``).

A preset is ``{"name", "caption", "settings": {...}}`` with optional
``"quench": {"at_t": t, setting: value, ...}``, ``"compare": bool`` (comparison mode) and
``"t_end"``: the time the run pauses at, with what the preset is about still on the plots
(Replay runs it again; a page without a preset streams on).
:func:`validate` checks it against ``dynamics.Settings`` and returns every problem;
a preset with a problem changes nothing.
"""

from __future__ import annotations

import json
from importlib.resources.abc import Traversable
from pathlib import Path

from dynamics import Settings, models

from .models import main_model_problem, main_models
from .serving.resources import asset

#: The presets shipped with the app (``assets/presets/attention.json``, see
#: :mod:`app.serving.resources`).
PRESET_FILE = asset("presets", "attention.json")
REQUIRED = ("name", "caption", "settings")
OPTIONAL = ("quench", "compare", "t_end")
#: Largest end of a preset's run (``"t_end"``).
MAX_T_END = 1000.0


def t_end_problem(t_end, after: float = 0.0) -> str | None:
    """Why ``t_end`` is not a run's end (a number in (``after``, :data:`MAX_T_END`]), or
    None."""
    if isinstance(t_end, bool) or not isinstance(t_end, (int, float)) \
            or not after < t_end <= MAX_T_END:
        return f"'t_end' must be a time in ({after:g}, {MAX_T_END:g}], got {t_end!r}"
    return None


def load_presets(path: str | Traversable | None = None) -> list[dict]:
    """The presets of ``path`` (default :data:`PRESET_FILE`; a JSON list), unvalidated.

    Raises ``OSError`` or ``ValueError`` (bad JSON, not a list); each preset is
    checked by :func:`validate` when it is loaded.
    """
    path = PRESET_FILE if path is None else path
    if isinstance(path, str):
        path = Path(path)
    presets = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(presets, list):
        raise ValueError(f"{path}: expected a JSON list of presets")
    return presets


def display_name(index: int, preset) -> str:
    """The name shown in the preset menu (also for a preset too broken to have one)."""
    if isinstance(preset, dict) and isinstance(preset.get("name"), str):
        return preset["name"]
    return f"preset {index + 1} (invalid)"


def _check_settings(mapping, prefix="") -> list[str]:
    """Problems of a ``{setting: value}`` mapping (``Settings.check``, Part I models only)."""
    values, problems = Settings.check(mapping)
    problem = main_model_problem(values["model"]) if "model" in values else None
    if problem:
        problems.append(problem)
    return [prefix + p for p in problems]


def validate(preset) -> list[str]:
    """Every problem of ``preset`` (empty if it can be applied)."""
    if not isinstance(preset, dict):
        return [f"a preset must be a JSON object, got {type(preset).__name__}"]
    errors = [f"missing field {k!r}" for k in REQUIRED if k not in preset]
    errors += [f"unknown field {k!r}" for k in preset if k not in REQUIRED + OPTIONAL]
    for key in ("name", "caption"):
        if key in preset and not isinstance(preset[key], str):
            errors.append(f"field {key!r} must be a string")
    if "compare" in preset and not isinstance(preset["compare"], bool):
        errors.append("field 'compare' must be true or false")
    settings = preset.get("settings", {})
    if not isinstance(settings, dict):
        errors.append("field 'settings' must be an object")
        settings = {}
    errors += _check_settings(settings)
    if "quench" in preset:
        quench = preset["quench"]
        if not isinstance(quench, dict):
            errors.append("field 'quench' must be an object")
        else:
            at = quench.get("at_t")
            if isinstance(at, bool) or not isinstance(at, (int, float)) or not at >= 0:
                errors.append("quench: 'at_t' must be a time ≥ 0")
            changes = quench_changes(quench)
            if not changes:
                errors.append("quench: no setting to change")
            model = settings.get("model", Settings.param.model.default) \
                if isinstance(settings, dict) else Settings.param.model.default
            restarts = (models.get(model).restart_settings()
                        if model in main_models() else ())
            restart = [k for k in changes if k in restarts]
            errors += [f"quench: {k!r} restarts the run, it cannot be quenched" for k in restart]
            errors += _check_settings({k: v for k, v in changes.items() if k not in restart},
                                      prefix="quench: ")
    if "t_end" in preset:
        quench = preset.get("quench")
        at = quench.get("at_t") if isinstance(quench, dict) else None
        after = at if isinstance(at, (int, float)) and not isinstance(at, bool) else 0.0
        problem = t_end_problem(preset["t_end"], after=max(0.0, after))
        if problem:
            errors.append(problem + (" (after its quench)" if after > 0 else ""))
    return errors


def quench_changes(quench: dict) -> dict:
    """The settings a quench ``{"at_t": t, setting: value, ...}`` changes."""
    return {k: v for k, v in quench.items() if k != "at_t"}


def preset_values(preset: dict) -> dict:
    """Full settings of a valid preset: the defaults, overridden by its settings."""
    defaults = {k: Settings.param[k].default for k in Settings.names()}
    return {**defaults, **preset["settings"]}
