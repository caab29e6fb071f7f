"""The map of an adaptive sweep in the Sweep tab: the sampled points, their values
interpolated on a picture of :data:`PICTURE_CELLS` × :data:`PICTURE_CELLS` cells (linear
on the Delaunay triangles of the points, in each axis' own coordinate: ``log10`` on a log
axis), and, for every cell of the picture, the sampled point nearest its centre — the run
the cell's tooltip names and a click on it loads (:func:`nearest_at`).

And the cells of a grid sweep given the same keys (:func:`grid_runs`), so that a grid
map's tooltip names the grid point a click loads, not the cursor's position.

An axis is ``(name, values, log)`` as in :mod:`app.sweeps.maps`; for an adaptive map its
values are the range's two ends.
"""

from __future__ import annotations

import numpy as np

#: Cells per axis of an adaptive map's interpolated picture.
PICTURE_CELLS = 48


def _coordinate(values, log: bool) -> np.ndarray:
    v = np.asarray(values, float)
    return np.log10(v) if log else v


def picture_edges(axis) -> np.ndarray:
    """The edges of the picture's cells along ``axis`` (evenly spaced in its coordinate)."""
    _, (lo, hi), log = axis[0], (axis[1][0], axis[1][-1]), axis[2]
    return (np.geomspace if log else np.linspace)(lo, hi, PICTURE_CELLS + 1)


def _unit(values, axis) -> np.ndarray:
    """``values`` in the axis' coordinate, its range mapped on [0, 1]."""
    lo, hi = _coordinate([axis[1][0], axis[1][-1]], axis[2])
    return (_coordinate(values, axis[2]) - lo) / (hi - lo)


def sampled_map(x_axis, y_axis, xs, ys, zs, second=None) -> dict:
    """What the map's ``Pipe`` sends for an adaptive sweep.

    Parameters
    ----------
    x_axis, y_axis : tuple
        ``(name, (lo, hi), log)``.
    xs, ys, zs : array_like
        The sampled points and their metric (NaN where it is).
    second : array_like, optional
        A second metric at the same points (the first-order ``T_max``).

    Returns
    -------
    dict
        ``x``, ``y`` (the picture's edges), ``z`` (interpolated, rows along ``y``; NaN
        outside the points' hull or with fewer than three), ``second`` (likewise, or
        None), ``x_run``, ``y_run``, ``z_run`` (per cell: the nearest sample's settings
        and value), ``nearest`` (its index) and ``px``, ``py``, ``pz`` (the samples).
    """
    xs, ys, zs = (np.asarray(a, float) for a in (xs, ys, zs))
    ex, ey = picture_edges(x_axis), picture_edges(y_axis)
    cx, cy = np.meshgrid(_unit(ex, x_axis), _unit(ey, y_axis))
    cx, cy = 0.5 * (cx[:-1, :-1] + cx[1:, 1:]), 0.5 * (cy[:-1, :-1] + cy[1:, 1:])
    ux, uy = _unit(xs, x_axis), _unit(ys, y_axis)
    shape = cx.shape
    out = {"x": ex, "y": ey, "px": xs, "py": ys, "pz": zs,
           "z": _interpolated(ux, uy, zs, cx, cy),
           "second": None if second is None else _interpolated(ux, uy, second, cx, cy)}
    if len(xs):
        d2 = (cx[..., None] - ux) ** 2 + (cy[..., None] - uy) ** 2
        nearest = np.argmin(d2, axis=-1)
        out.update(nearest=nearest, x_run=xs[nearest], y_run=ys[nearest], z_run=zs[nearest])
    else:
        blank = np.full(shape, np.nan)
        out.update(nearest=np.full(shape, -1), x_run=blank, y_run=blank, z_run=blank)
    return out


def _interpolated(ux, uy, values, cx, cy) -> np.ndarray:
    """``values`` at the points ``(ux, uy)`` interpolated linearly on their Delaunay
    triangles at the cell centres ``(cx, cy)`` (NaN outside; all NaN under 3 points)."""
    values = np.asarray(values, float)
    keep = np.isfinite(values)
    if keep.sum() < 3:
        return np.full(cx.shape, np.nan)
    from scipy.interpolate import LinearNDInterpolator
    from scipy.spatial import QhullError

    try:
        ip = LinearNDInterpolator(np.column_stack([ux[keep], uy[keep]]), values[keep])
    except QhullError:  # the points on a line (the first round's corners not all in)
        return np.full(cx.shape, np.nan)
    return ip(cx, cy)


def nearest_at(data: dict, x: float, y: float) -> int | None:
    """The index of the sample a click at ``(x, y)`` loads: the one the tooltip of the
    picture's cell holding ``(x, y)`` names (None outside the picture or before any)."""
    i = int(np.searchsorted(data["x"], x)) - 1
    j = int(np.searchsorted(data["y"], y)) - 1
    nearest = data.get("nearest")
    if nearest is None or not (0 <= i < nearest.shape[1] and 0 <= j < nearest.shape[0]):
        return None
    k = int(nearest[j, i])
    return k if k >= 0 else None


def grid_runs(xs, ys, z) -> dict:
    """The runs of a grid map's cells (rows along ``y``): ``x_run``, ``y_run`` (each cell's
    grid values) and ``z_run`` (its value)."""
    gx, gy = np.meshgrid(np.asarray(xs, float), np.asarray(ys, float))
    return {"x_run": gx, "y_run": gy, "z_run": np.asarray(z, float)}
