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

from dynamics import PART_I_MODELS

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _text(raw) -> str:
    """The first value of a query entry (``session_args`` gives lists of bytes)."""
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    return str(raw)


def parse_value(p: param.Parameter, text: str):
    """Convert ``text`` to a value of parameter ``p`` and validate it (ValueError if not)."""
    text = text.strip()
    if isinstance(p, param.Boolean):
        if text.lower() not in _TRUE + _FALSE:
            raise ValueError(f"{p.name} must be true or false, got {text!r}")
        value = text.lower() in _TRUE
    elif isinstance(p, param.Integer):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{p.name} must be an integer, got {text!r}") from None
    elif isinstance(p, param.Number):
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{p.name} must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"{p.name} must be finite, got {text!r}")
    else:
        value = text
    if p.name == "model" and value not in PART_I_MODELS:
        raise ValueError(f"model must be one of {', '.join(PART_I_MODELS)}, got {text!r}")
    try:
        p._validate(value)
    except ValueError as err:
        if isinstance(p, param.Selector):
            raise ValueError(f"{p.name} must be one of {', '.join(map(str, p.objects))}, "
                             f"got {text!r}") from None
        raise ValueError(str(err)) from None
    return value


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
    for key, raw in query.items():
        if key not in parameters:
            messages.append(f"unknown URL parameter {key!r} ignored")
            continue
        p = parameters[key]
        try:
            values[key] = parse_value(p, _text(raw))
        except ValueError as err:
            messages.append(f"URL parameter {key}: {err}; using the default {p.default!r}")
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
