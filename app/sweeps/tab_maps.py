"""The maps of the Sweep tab (:class:`~app.sweeps.sweep_tab.SweepTab` draws with these):
the metric's map fed by a ``Pipe`` (a grid's cells, or an adaptive sweep's interpolated
picture with its points), the theory over it, the second map beside it, and the run a
click loads — the one the tooltip names.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np

from dynamics.sweeps import AdaptiveRun

from .export import example_dataset
from .grid import cell_at, reads_path
from .maps import (
    blank_data,
    cell_map,
    colour_limits,
    lag_theory,
    map_data,
    sample_points,
    shown_values,
    theory_contours,
)
from .samples import nearest_at, sampled_map


class SweepMaps:
    """The plots of :class:`~app.sweeps.sweep_tab.SweepTab` (a mixin: it reads the tab's
    choices, its ``run``, ``axes``, ``values``, ``sampled`` and ``base``)."""

    # -- the plots ------------------------------------------------------------------
    def _new_plots(self) -> None:
        """Fresh streams and maps for the axes of a new sweep (the settings on the axes,
        their spacing and the metric are fixed for the life of a map)."""
        self.pipe = hv.streams.Pipe(data=blank_data(*self._axis_specs()))
        self.theory_pipe = hv.streams.Pipe(data=None)
        self.map = hv.DynamicMap(self._metric_map, streams=[self.pipe])
        self.tap = hv.streams.Tap(source=self.map, x=None, y=None)
        self.tap.add_subscriber(self.load_cell)
        self.theory = hv.DynamicMap(self._theory_overlay, streams=[self.theory_pipe])
        self.second = hv.DynamicMap(self._second_map, streams=[self.pipe])
        self.dots = hv.DynamicMap(lambda data: sample_points(data, *self._axis_specs()),
                                  streams=[self.pipe])
        self.map_pane.object = self.map * self.theory * self.dots
        self.second_pane.object = self.second

    def _axis_specs(self) -> tuple[tuple, tuple]:
        """The axes as :mod:`app.sweeps.maps` takes them: ``(name, values, log)``."""
        return (self.x, self.axes[0], self.x_log), (self.y, self.axes[1], self.y_log)

    @property
    def adaptive(self) -> bool:
        """The map shown is an adaptive sweep's."""
        return isinstance(self.run, AdaptiveRun)

    def _push(self) -> None:
        if self.adaptive:
            ks = sorted(self.sampled)
            samples = [self.run.samples[k] for k in ks]
            column = {m: [self.sampled[k][m] for k in ks] for m in self.run.metrics}
            data = sampled_map(*self._axis_specs(), [s[self.x] for s in samples],
                               [s[self.y] for s in samples], column[self.metric_shown],
                               column.get("first_order_blowup_time"))
            data["runs"] = ks
        else:
            data = map_data(*self._axis_specs(), self.values.get(self.metric_shown),
                            self.values.get("first_order_blowup_time"))
        self.pipe.send(data)
        self.theory_pipe.send(self._theory_data())

    def dataset(self):
        """The map shown as an ``xarray.Dataset`` (the sweep's, or the example's; None
        before any): what the download buttons write."""
        if self.run is not None:
            return self.run.dataset()
        return example_dataset(self.example) if self.example is not None else None

    @property
    def metric_shown(self) -> str:
        if self.run is not None:
            return self.run.metrics[0]
        return next(iter(self.values), self.metric)

    def _metric_map(self, data):
        label = self.metric_shown
        if "px" in data:  # an adaptive map: its picture's cells are not runs (no lines)
            return cell_map(data["x"], data["y"], data["z"], *self._axis_specs(),
                            hv.Dimension(label, label=label),
                            f"{label} (click: the nearest point to the live view)",
                            ["hover", "tap"], colour_limits(data["z"]),
                            runs=data).opts(line_alpha=0.0)
        return cell_map(data["x"], data["y"], data["z"], *self._axis_specs(),
                        hv.Dimension(label, label=label),
                        f"{label} (click to load a cell into the live view)",
                        ["hover", "tap"], colour_limits(data["z"]), runs=data)

    def _second_map(self, data):
        x, y = data["x"], data["y"]
        z = data.get("second")
        if z is None:
            z = np.full((len(y) - 1, len(x) - 1), np.nan)
        # (the colour range of the values drawn: −0.5 … 0.5 while blank)
        return cell_map(x, y, z, *self._axis_specs(), "first_order_blowup_time",
                        "first-order Tₘₐₓ = min 1/(2 a v s0) (theory)", ["hover"],
                        colour_limits(shown_values(z)[0]))

    def _theory_data(self):
        """The two-source lag amplitude on a fine grid of the axes, or None."""
        if not (self.base is not None and self.metric_shown == "lag_amplitude"
                and reads_path(self.model)):
            return None
        return lag_theory(self.base, *self._axis_specs())

    def _theory_overlay(self, data):
        return theory_contours(data, *self._axis_specs())

    def load_cell(self, x: float | None = None, y: float | None = None) -> None:
        """A click at ``(x, y)`` on the map (the ``Tap`` stream's subscriber; None before
        any click): load the nearest grid point into the live view (``on_point``)."""
        if x is None or y is None or self.base is None or self.on_point is None:
            return
        point = self.point_at(x, y)
        if point is not None:
            self.on_point(point)

    def point_at(self, x: float, y: float) -> dict | None:
        """The settings of the run a click at ``(x, y)`` loads (model and the two axes):
        the grid cell holding it, or on an adaptive map the sampled point the tooltip
        there names (:func:`~app.sweeps.samples.nearest_at`)."""
        xs, ys = self.axes
        if not xs:
            return None
        if self.adaptive:
            k = nearest_at(self.pipe.data, x, y)
            if k is None:
                return None
            run = self.run.samples[self.pipe.data["runs"][k]]
            point = {"model": self.model, self.x: run[self.x], self.y: run[self.y]}
        else:
            i, j = cell_at(xs, self.x_log, x), cell_at(ys, self.y_log, y)
            if i is None or j is None:
                return None
            point = {"model": self.model, self.x: xs[i], self.y: ys[j]}
        if reads_path(self.model):
            point["path"] = self.base["path"]
        return point
