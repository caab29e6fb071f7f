"""The grid of a sweep: its axes from their command-line form (:func:`parse_axis`), its
values checked against the settings' bounds (:func:`check_grid`), and its points in C
order (:func:`grid_points`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import param

from ..settings import Settings


def parse_axis(text: str) -> tuple[str, list]:
    """One grid axis from its command-line form.

    ``name=lo:hi:log:n`` (``n`` values spaced evenly in ``log``), ``name=lo:hi:lin:n``
    (or ``lo:hi:n``), or ``name=v1,v2,…`` (numbers or words, e.g. ``path=rotation,drift``).

    Returns
    -------
    name : str
        The setting (dashes read as underscores).
    values : list
        Floats, ints for an integer setting, strings for a choice or text setting.

    Raises
    ------
    ValueError
        Malformed text, or an unknown setting.
    """
    name, sep, spec = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name or not spec.strip():
        raise ValueError(f"grid axis must read name=lo:hi:log:n, name=lo:hi:n or "
                         f"name=v1,v2,…, got {text!r}")
    if name not in Settings.names():
        raise ValueError(f"grid axis {text!r}: unknown setting {name!r}")
    parts = [p.strip() for p in spec.split(":")]
    p = Settings.param[name]
    numeric = isinstance(p, param.Number)
    if len(parts) == 1:
        words = [w.strip() for w in spec.split(",")]
        if numeric:
            try:
                values = [float(w) for w in words]
            except ValueError:
                raise ValueError(f"grid axis {text!r}: {name} takes numbers") from None
        else:
            values = words
    elif len(parts) in (3, 4) and numeric:
        scale = parts[2] if len(parts) == 4 else "lin"
        try:
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[-1])
        except ValueError:
            raise ValueError(f"grid axis {text!r}: lo and hi must be numbers and n an "
                             "integer") from None
        if n < 1:
            raise ValueError(f"grid axis {text!r}: n must be at least 1")
        if scale == "log":
            if lo <= 0 or hi <= 0:
                raise ValueError(f"grid axis {text!r}: a log axis needs lo, hi > 0")
            values = np.geomspace(lo, hi, n).tolist()
        elif scale == "lin":
            values = np.linspace(lo, hi, n).tolist()
        else:
            raise ValueError(f"grid axis {text!r}: spacing must be log or lin, got {scale!r}")
    else:
        raise ValueError(f"grid axis must read name=lo:hi:log:n, name=lo:hi:n or "
                         f"name=v1,v2,… (ranges for numeric settings only), got {text!r}")
    if isinstance(p, param.Integer):
        values = [int(round(v)) for v in values]
    return name, values


def check_grid(settings: Settings, grid: Mapping[str, Sequence]) -> dict[str, list]:
    """The grid with every value checked against its setting's bounds.

    Parameters
    ----------
    settings : Settings
        The base settings (not changed).
    grid : mapping of str to sequence
        ``{setting: values}``, one axis per setting, in order.

    Returns
    -------
    dict of str to list
        The values converted to the setting's type (a number given for a text setting
        such as ``value_diag`` becomes its text).

    Raises
    ------
    ValueError
        An empty grid or axis, an unknown setting, a repeated value, or a value out of
        bounds (every problem listed, each naming the setting).
    """
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("grid must be a non-empty mapping {setting: [values]}")
    out, problems = {}, []
    names = Settings.names()
    for name, raw in grid.items():
        if name not in names:
            problems.append(f"grid: unknown setting {name!r}")
            continue
        values = [raw] if isinstance(raw, str) else list(np.asarray(raw, dtype=object).ravel())
        if not values:
            problems.append(f"grid: {name} has no values")
            continue
        p = Settings.param[name]
        converted = []
        for v in values:
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(p, param.String) and isinstance(v, int | float) \
                    and not isinstance(v, bool):
                v = repr(float(v))
            checked, errors = Settings.check({name: v})
            if errors:
                problems += [f"grid value {v!r} of {name}: {e}" for e in errors]
            else:
                converted.append(checked[name])
        if len(set(converted)) != len(converted):
            problems.append(f"grid: {name} repeats a value")
        out[name] = converted
    if problems:
        raise ValueError("; ".join(problems))
    return out


def grid_points(grid: Mapping[str, list]) -> list[tuple[tuple[int, ...], dict]]:
    """Every point of the grid, in C order: ``(index, {setting: value})``."""
    names = list(grid)
    ranges = [range(len(grid[n])) for n in names]
    return [(idx, {n: grid[n][i] for n, i in zip(names, idx, strict=True)})
            for idx in itertools.product(*ranges)]
