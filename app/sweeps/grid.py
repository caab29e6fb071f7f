"""The axes of a sweep: which settings and metrics a model can sweep, a first range for
each setting, the values along an axis and the edges of the cells centred on them."""

from __future__ import annotations

import numpy as np
import param

from dynamics import Settings, models
from dynamics.sweeps import METRICS

#: Text settings swept as one number (a diagonal given by one value).
NUMBER_TEXTS = ("kernel_diag", "value_diag")


def sweepable(model: str) -> list[str]:
    """The numeric settings ``model`` reads (and its one-number diagonals)."""
    names = []
    for name in models.get(model).reads():
        p = Settings.param[name]
        if (isinstance(p, param.Number) and not isinstance(p, param.Integer)) \
                or name in NUMBER_TEXTS:
            names.append(name)
    return [n for n in names if n not in ("norm_limit",)]


def reads_path(model: str) -> bool:
    """``model`` moves its features along a prescribed path (the attention-only model)."""
    return "path" in models.get(model).reads()


#: The first model on a prescribed path: the tab's default (the lag theory is its).
PATH_MODEL = next(name for name in models.names() if reads_path(name))


def model_metrics(model: str) -> list[str]:
    """The metrics of a sweep of ``model`` (those of every model and of its part)."""
    part = models.get(model).part
    return [m for m, spec in METRICS.items() if spec.part in (0, part)]


def kept_choices(names: list[str], metrics: list[str], x: str, y: str,
                 metric: str) -> dict:
    """The choices to change when the settings ``names`` and the ``metrics`` of a new
    model replace the old ones: two different settings among them (each new one with
    its :func:`default_range`: ``x_start``, ``x_end``, …) and a metric among them; the
    choices they still hold are kept."""
    update = {}
    if x not in names:
        update["x"] = names[0]
    if y not in names or (update.get("x", x) == y and len(names) > 1):
        update["y"] = next(n for n in names if n != update.get("x", x))
    if metric not in metrics:
        update["metric"] = metrics[0]
    for axis in ("x", "y"):
        name = update.get(axis)
        if name is not None:
            update[f"{axis}_start"], update[f"{axis}_end"] = default_range(name)
    return update


def axis_values(start: float, end: float, n: int, log: bool) -> list[float]:
    """``n`` values from ``start`` to ``end``, evenly spaced (in ``log`` if asked)."""
    if log:
        if start <= 0 or end <= 0:
            raise ValueError("a logarithmic axis needs a positive start and end")
        return np.geomspace(start, end, n).tolist()
    return np.linspace(start, end, n).tolist()


def default_range(name: str) -> tuple[float, float]:
    """A first range for a swept setting: its soft bounds (or bounds) kept within
    ``[0.01, 10]``; ``(0.5, 2)`` for a one-number diagonal."""
    p = Settings.param[name]
    if not isinstance(p, param.Number):
        return 0.5, 2.0
    lo, hi = p.softbounds or p.bounds
    return max(lo or 0.0, 1e-2), min(hi if hi is not None else 10.0, 10.0)


def cell_edges(values, log: bool) -> np.ndarray:
    """Edges of the cells centred on ``values`` (geometric midpoints on a log axis)."""
    v = np.asarray(values, float)
    if len(v) == 1:
        return np.array([v[0] * 0.9, v[0] * 1.1]) if log else np.array([v[0] - 0.5,
                                                                         v[0] + 0.5])
    if log:
        lv = np.log(v)
        mid = (lv[1:] + lv[:-1]) / 2
        return np.exp(np.concatenate([[2 * lv[0] - mid[0]], mid, [2 * lv[-1] - mid[-1]]]))
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]])


def cell_at(values, log: bool, v: float) -> int | None:
    """The index of the cell of ``values`` (:func:`cell_edges`) holding ``v``; None
    outside the cells."""
    i = np.searchsorted(cell_edges(values, log), v) - 1
    return i if 0 <= i < len(values) else None
