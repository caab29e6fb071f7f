"""Settings ⇄ URL query string (``pn.state.location``).

Query keys are the parameter names of ``dynamics.Settings`` (plus a few view
parameters of the dashboard).  Parsing never raises: a malformed or out-of-range
value is reported in the returned messages and left at its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from urllib.parse import urlencode

import param

from app.models import main_model_problem
from dynamics import Settings

SETTINGS = frozenset(Settings.names())
#: Settings a URL never carries: the checkpoint folder is a path on the server (its
#: environment or the installed MiniLM choose it), not the page's to set.
NOT_IN_URL = ("checkpoint",)
#: Largest N a URL may ask for (every frame sends three N×N images to the page).
MAX_URL_TOKENS = 256
#: Most query keys read (the rest are ignored with a message).
MAX_KEYS = 64
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _text(raw) -> str:
    """The first value of a query entry (``session_args`` gives lists of bytes)."""
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    return str(raw)


def parse_value(p: param.Parameter, text: str):
    """Convert ``text`` to a value of parameter ``p`` and validate it (ValueError if not).

    Settings are converted and checked by ``Settings.check`` (one validation for
    URLs, presets and pasted JSON); the dashboard's own view parameters here.
    """
    text = text.strip()
    if p.name == "n_tokens":
        _url_tokens(p, text)
    if p.name in SETTINGS:
        values, problems = Settings.check({p.name: text}, from_text=True)
        if problems:
            raise ValueError("; ".join(problems))
        value = values[p.name]
        problem = main_model_problem(value) if p.name == "model" else None
        if problem:
            raise ValueError(problem)
        return value
    if isinstance(p, param.Boolean):
        if text.lower() not in _TRUE + _FALSE:
            raise ValueError(f"{p.name} must be true or false, got {text!r}")
        value = text.lower() in _TRUE
    elif isinstance(p, param.Integer):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{p.name} must be an integer, got {_short(text)!r}") from None
    elif isinstance(p, param.Number):
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{p.name} must be a number, got {_short(text)!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"{p.name} must be finite, got {_short(text)!r}")
    else:
        value = text
    try:
        p._validate(value)
    except ValueError as err:
        if isinstance(p, param.Selector):
            raise ValueError(f"{p.name} must be one of {', '.join(map(str, p.objects))}, "
                             f"got {_short(text)!r}") from None
        raise ValueError(str(err)) from None
    return value


def _url_tokens(p: param.Parameter, text: str) -> None:
    """Refuse an ``n_tokens`` outside what a URL may ask for, with one message naming
    the one range a URL accepts, ``[low, MAX_URL_TOKENS]`` (ValueError): 300 and 2000
    had contradicting messages ("[2, 1024]", then "above 256 not accepted")."""
    try:
        n = int(text)
    except ValueError:
        return  # (refused by the settings' own check)
    low, high = p.bounds
    if not low <= n <= MAX_URL_TOKENS:
        slider = f" (up to {high} with the slider)" if MAX_URL_TOKENS < n <= high else ""
        raise ValueError(f"n_tokens from a URL must be in [{low}, {MAX_URL_TOKENS}], "
                         f"got {n}{slider}")


def _short(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters (messages quote what the URL held)."""
    return text if len(text) <= limit else text[:limit] + "…"


def parse_query(query: Mapping, parameters: Mapping[str, param.Parameter]):
    """Values and messages from a query mapping.

    Parameters
    ----------
    query : mapping of str to str, bytes or list
        The query string, e.g. ``pn.state.session_args``.
    parameters : mapping of str to param.Parameter
        The parameters a key may set.

    Returns
    -------
    values : dict
        Valid values by name.
    messages : list of str
        One line per ignored key or refused value (which then keeps its default).
    """
    values, messages = {}, []
    if not isinstance(query, Mapping):
        return values, [f"the URL query was not understood ({type(query).__name__}); ignored"]
    if len(query) > MAX_KEYS:
        messages.append(f"the URL has {len(query)} parameters; only the first {MAX_KEYS} read")
    for i, (key, raw) in enumerate(query.items()):
        if i >= MAX_KEYS:
            break
        name = _text(key)
        if name not in parameters:
            messages.append(f"unknown URL parameter {_short(name)!r} ignored")
            continue
        p = parameters[name]
        if isinstance(raw, (list, tuple)) and len(raw) > 1:
            messages.append(f"URL parameter {name} given {len(raw)} times; the first is used")
        try:
            values[name] = parse_value(p, _text(raw))
        except ValueError as err:
            messages.append(f"URL parameter {name}: {err}; using the default {p.default!r}")
    return values, messages


def format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_query(objects, names) -> dict[str, str]:
    """The non-default values of ``names`` found on ``objects`` (Parameterized)."""
    query = {}
    for obj in objects:
        for name in names:
            if name in obj.param and getattr(obj, name) != obj.param[name].default:
                query[name] = format_value(getattr(obj, name))
    return query


def search_string(query: Mapping[str, str]) -> str:
    """``?key=value&…`` (empty for an empty query)."""
    return "?" + urlencode(query) if query else ""
