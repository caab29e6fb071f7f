"""A sweep's result as an ``xarray.Dataset`` (:func:`sweep_dataset`), and back: the point
results of a finished sweep's dataset (:func:`point_results`, for a cache hit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .metrics import METRICS


def sweep_dataset(grid: Mapping[str, list], base: Mapping, metrics: Sequence[str],
                  results: Mapping[tuple[int, ...], dict], t_end: float, every: int):
    """The results of a sweep as an ``xarray.Dataset`` (points without a result:
    ``cancelled``).

    Parameters
    ----------
    grid : mapping of str to list
        The checked grid (:func:`~dynamics.sweeps.grid.check_grid`): one dimension each.
    base : mapping
        The base settings, kept as attributes ``setting_<name>`` (those not swept).
    metrics : sequence of str
    results : mapping
        ``{index: point_result}`` (:func:`~dynamics.sweeps.points.run_point`).
    t_end : float
    every : int
    """
    import xarray as xr

    dims = list(grid)
    shape = tuple(len(v) for v in grid.values())
    data = {m: np.full(shape, np.nan) for m in metrics}
    status = np.full(shape, "cancelled", dtype=object)
    message = np.full(shape, "", dtype=object)
    for idx, res in results.items():
        for m in metrics:
            data[m][idx] = res[m]
        status[idx], message[idx] = res["status"], res["message"]
    variables = {m: (dims, v, {"doc": METRICS[m].doc}) for m, v in data.items()}
    variables["status"] = (dims, status, {"doc": "completed, diverged, failed, error "
                                                 "or cancelled"})
    variables["message"] = (dims, message, {"doc": "why the run stopped, if it did"})
    attrs = {f"setting_{k}": (int(v) if isinstance(v, bool) else v)
             for k, v in base.items() if k not in grid}
    attrs.update(t_end=t_end, every=every, swept=", ".join(dims),
                 metrics=", ".join(metrics))
    coords = {n: _coordinate(v) for n, v in grid.items()}
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _coordinate(values: list) -> np.ndarray:
    """A dimension's coordinate: numbers as floats (also the one-number texts of
    ``kernel_diag`` and ``value_diag``), other words as strings."""
    try:
        return np.array([float(v) for v in values])
    except (TypeError, ValueError):
        return np.asarray(values, dtype=object)


def point_results(ds, points: Sequence, metrics: Sequence[str]) -> list:
    """``[(index, point_result)]`` of a finished sweep's dataset, for each of ``points``
    (``(index, values)``)."""
    out = []
    for idx, _ in points:
        res = {m: float(ds[m].values[idx]) for m in metrics}
        res["status"], res["message"] = str(ds["status"].values[idx]), \
            str(ds["message"].values[idx])
        out.append((idx, res))
    return out


def point_dataset(names: Sequence[str], base: Mapping, metrics: Sequence[str],
                  samples: Sequence[Mapping], results: Mapping[tuple[int, ...], dict],
                  t_end: float, every: int, attrs: Mapping):
    """The results of an adaptive sweep as an ``xarray.Dataset`` along one dimension
    ``point``: the swept settings ``names`` (their values in ``samples``, one mapping per
    point) and the metrics as variables, ``status`` and ``message``; points without a
    result are ``cancelled``. Attributes: the base settings not swept, ``t_end``,
    ``every``, ``swept``, ``metrics`` and ``attrs``."""
    import xarray as xr

    n = len(samples)
    data = {m: np.full(n, np.nan) for m in metrics}
    status = np.full(n, "cancelled", dtype=object)
    message = np.full(n, "", dtype=object)
    for (k,), res in results.items():
        for m in metrics:
            data[m][k] = res[m]
        status[k], message[k] = res["status"], res["message"]
    variables = {name: ("point", np.array([s[name] for s in samples], dtype=float),
                        {"doc": f"the setting {name} of each point"}) for name in names}
    variables.update({m: ("point", v, {"doc": METRICS[m].doc}) for m, v in data.items()})
    variables["status"] = ("point", status, {"doc": "completed, diverged, failed, error "
                                                    "or cancelled"})
    variables["message"] = ("point", message, {"doc": "why the run stopped, if it did"})
    out = {f"setting_{k}": (int(v) if isinstance(v, bool) else v)
           for k, v in base.items() if k not in names}
    out.update(t_end=t_end, every=every, swept=", ".join(names), metrics=", ".join(metrics))
    out.update(attrs)
    return xr.Dataset(variables, coords={"point": np.arange(n)}, attrs=out)
