"""The maps of the Sweep tab, drawn with HoloViews: a metric over the cells of two swept
settings (a ``QuadMesh``, blank and transparent before any value), and the theory drawn
over it, contours of the two-source lag amplitude ``βδω/√(λ² + ω²)`` (Theory page).

An axis is given as ``(name, values, log)``: the swept setting, the values of its cells
and whether they are spaced logarithmically.
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (the options below are Bokeh's)
import numpy as np

from dynamics import Settings
from dynamics.sweeps import two_source_lag_amplitude

from .grid import cell_edges
from .samples import grid_runs

#: Settings of the two-source lag formula (the oscillation path's).
LAG_SETTINGS = ("beta", "gamma", "omega", "amplitude")
#: Cells of the theory contours' own grid, per axis.
THEORY_CELLS = 64


def shown_values(z) -> tuple[np.ndarray, bool]:
    """``z`` as drawn, and whether it is blank: a map with no finite value yet is drawn
    transparent, with zeros (the plot computes its colour range from the values)."""
    z = np.asarray(z, float)
    blank = not np.isfinite(z).any()
    return (np.zeros_like(z) if blank else z), blank


def colour_limits(z) -> tuple[float, float]:
    """The range of the finite values of ``z`` (``(0, 1)`` before any cell is filled)."""
    finite = np.asarray(z, float)[np.isfinite(z)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def dimension(name: str) -> hv.Dimension:
    """The map's dimension of the setting ``name``, labelled as its widget."""
    return hv.Dimension(name, label=Settings.param[name].label or name)


def map_data(x_axis, y_axis, z=None, second=None) -> dict:
    """What a map's ``Pipe`` sends: the cells' edges ``x``, ``y``, the values ``z``
    (rows along ``y``; blank without them) and the values of a second map (or None)."""
    (_, xs, x_log), (_, ys, y_log) = x_axis, y_axis
    if z is None:
        z = np.full((len(ys), len(xs)), np.nan)
    return {"x": cell_edges(xs, x_log), "y": cell_edges(ys, y_log), "z": z.copy(),
            "second": None if second is None else second.copy(), **grid_runs(xs, ys, z)}


def blank_data(x_axis, y_axis) -> dict:
    """A blank map's data before any sweep: one cell on ``[1, 2]²`` without values."""
    (_, xs, x_log), (_, ys, y_log) = x_axis, y_axis
    x = cell_edges(xs, x_log) if xs else np.array([1.0, 2.0])
    y = cell_edges(ys, y_log) if ys else np.array([1.0, 2.0])
    blank = np.full((len(y) - 1, len(x) - 1), np.nan)
    return {"x": x, "y": y, "z": blank, "second": blank, "x_run": blank, "y_run": blank,
            "z_run": blank}


def cell_map(x, y, z, x_axis, y_axis, vdim, title: str, tools: list[str], clim,
             runs: dict | None = None):
    """The cells of a metric: ``z`` (rows along ``y``) over the edges ``x``, ``y``, NaN
    cells grey, in the colour range ``clim``, with ``tools`` (hover, tap).

    ``runs`` (``x_run``, ``y_run``, ``z_run`` per cell: :mod:`app.sweeps.samples`): the
    tooltip names the run a click on the cell loads (its two settings and its value),
    not the cursor's position."""
    z, blank = shown_values(z)
    kdims = [dimension(x_axis[0]), dimension(y_axis[0])]
    name = vdim.name if isinstance(vdim, hv.Dimension) else vdim
    if runs is None:
        mesh = hv.QuadMesh((x, y, z), kdims=kdims, vdims=[vdim])
        hover = {}
    else:
        columns = [shown_values(runs[k])[0] for k in ("x_run", "y_run", "z_run")]
        mesh = hv.QuadMesh((x, y, z, *columns), kdims=kdims,
                           vdims=[vdim, "x_run", "y_run", "z_run"])
        hover = {"hover_tooltips": [(f"{kdims[0].label} (run)", "@{x_run}"),
                                    (f"{kdims[1].label} (run)", "@{y_run}"),
                                    (f"{name} (run)", "@{z_run}")]}
    return mesh.opts(framewise=True, fill_alpha=0.0 if blank else 1.0, tools=tools,
                     colorbar=True, cmap="viridis", logx=x_axis[2], logy=y_axis[2],
                     width=520, height=440, title=title,
                     clipping_colors={"NaN": "#dddddd"}, clim=clim, **hover)


def sample_points(data, x_axis, y_axis):
    """The sampled points of an adaptive map (``px``, ``py`` of its data), drawn as
    small white dots over it (none on a grid map)."""
    kdims = [dimension(x_axis[0]), dimension(y_axis[0])]
    px, py = data.get("px"), data.get("py")
    points = hv.Points((px, py) if px is not None else ([], []), kdims=kdims)
    return points.opts(color="white", line_color="black", size=5, tools=[],
                       show_legend=False)


def lag_theory(base: dict, x_axis, y_axis) -> dict | None:
    """The two-source lag amplitude on a fine grid of the axes (:data:`THEORY_CELLS`),
    or None unless ``base`` is on the oscillation path and both axes are among
    :data:`LAG_SETTINGS`."""
    (x, xs, x_log), (y, ys, y_log) = x_axis, y_axis
    if not (base["path"] == "oscillation" and {x, y} <= set(LAG_SETTINGS)):
        return None
    fx = (np.geomspace if x_log else np.linspace)(xs[0], xs[-1], THEORY_CELLS)
    fy = (np.geomspace if y_log else np.linspace)(ys[0], ys[-1], THEORY_CELLS)
    X, Y = np.meshgrid(fx, fy)
    values = {k: base[k] for k in LAG_SETTINGS}
    values[x], values[y] = X, Y
    return {"x": fx, "y": fy, "z": two_source_lag_amplitude(
        values["beta"], values["gamma"], values["omega"], values["amplitude"])}


def theory_contours(data, x_axis, y_axis):
    """Dashed white contours of :func:`lag_theory`'s ``data`` (none without it)."""
    kdims = [dimension(x_axis[0]), dimension(y_axis[0])]
    if data is None or "z" not in data or np.all(np.isnan(data["z"])):
        return hv.Contours([], kdims=kdims)
    mesh = hv.QuadMesh((data["x"], data["y"], data["z"]), kdims=kdims, vdims=["theory"])
    return hv.operation.contours(mesh, levels=6).opts(
        color="white", line_dash="dashed", show_legend=False)
