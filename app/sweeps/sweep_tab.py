"""The Sweep tab: a phase diagram of one metric over two settings (``dynamics.sweep``).

A view only. "Run" starts a :class:`dynamics.SweepRun` of the current settings (the live
view's, with the model chosen here) over two settings and their ranges on
``dask.distributed`` (one embedded ``LocalCluster`` per server process, shared by the
sessions and kept for the next sweep), in a thread of its own; each finished batch fills
its cells of the map (a HoloViews ``QuadMesh`` fed by a ``Pipe``), the progress bar
advances, and "Cancel" stops the sweep. Hovering a cell shows the settings and the value;
clicking it loads that point into the live view (``on_point``).

The tab never opens empty: it shows a shipped example (:data:`EXAMPLE`, the lag
amplitude of the attention-only model on the oscillation path over β × γ with the
theory's contours, computed by :func:`write_example`), its choices in the controls, and
says how to run one's own. Regenerate it after a change of the dynamics with
``python -c "from app.sweeps.sweep_tab import write_example; write_example()"`` (its test
checks cells of it against fresh runs).

"Cancel" cancels the sweep's pending tasks and restarts the workers still running one
of its batches (a running task cannot be interrupted otherwise: it kept a core busy
for up to a minute); another sweep's tasks on those workers are run again elsewhere.

Theory drawn over the map (Theory page): on a ``lag_amplitude`` sweep of the
oscillation path, contours of the two-source lag amplitude ``βδω/√(λ² + ω²)``; on a
``blowup_time`` sweep, the first-order ``T_max`` as a second map beside it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (the options below are Bokeh's)
import numpy as np
import panel as pn
import param

from app.serving.resources import asset
from dynamics import PATHS, Settings, SweepRun, models
from dynamics.sweeps import METRICS, QUIET_CLUSTER, two_source_lag_amplitude

#: Settings of the two-source lag formula (the oscillation path's).
LAG_SETTINGS = ("beta", "gamma", "omega", "amplitude")
#: Text settings swept as one number (a diagonal given by one value).
NUMBER_TEXTS = ("kernel_diag", "value_diag")
#: Cells of the theory contours' own grid, per axis.
THEORY_CELLS = 64

#: The example shown when the tab opens (:func:`write_example`).
EXAMPLE = asset("data", "sweep_example.json")
#: The example's choices (the tab's controls) and its base settings (the defaults).
EXAMPLE_CHOICES = {"model": "attention", "path": "oscillation", "x": "beta", "x_start": 0.3,
                   "x_end": 3.0, "x_log": True, "y": "gamma", "y_start": 0.1, "y_end": 10.0,
                   "y_log": True, "cells": 8, "metric": "lag_amplitude", "t_end": 5.0}
#: What the example is, and how to run one's own.
EXAMPLE_TEXT = (
    "**Example shown at first** (precomputed, shipped with the app): the lag amplitude of "
    "the attention-only model on the oscillation path over β × γ, dashed: the two-source "
    "theory's contours (Theory page, tracking the moving softmax). **Your own:** choose a "
    "model, two settings, their ranges and a metric on the left and press **Run** (the "
    "other settings are the main tab's); click a cell to load it into the live view.")

_CLIENT = None
_CLIENT_LOCK = threading.Lock()


def shared_client():
    """The process's ``distributed.Client`` of an embedded ``LocalCluster`` (one
    single-threaded worker process per core), started on first use and kept."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None or _CLIENT.status not in ("running", "connecting"):
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, **QUIET_CLUSTER)
            _CLIENT = Client(cluster, set_as_default=False)
        return _CLIENT


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


def example_grid() -> tuple[dict, dict]:
    """The example's base settings and grid (:data:`EXAMPLE_CHOICES`)."""
    c = EXAMPLE_CHOICES
    base = Settings(model=c["model"], path=c["path"]).values()
    grid = {c["x"]: axis_values(c["x_start"], c["x_end"], c["cells"], c["x_log"]),
            c["y"]: axis_values(c["y_start"], c["y_end"], c["cells"], c["y_log"])}
    return base, grid


def write_example(path=None, client=None) -> dict:
    """Run the example sweep and write it (JSON) to ``path`` (default: the repository's
    ``assets/data/sweep_example.json``); returns what was written."""
    c = EXAMPLE_CHOICES
    base, grid = example_grid()
    run = SweepRun(Settings(**base), grid, c["t_end"], [c["metric"]], client=client)
    ds = run.run()
    values = ds[c["metric"]].transpose(c["y"], c["x"]).values
    status = ds["status"].transpose(c["y"], c["x"]).values
    example = {"choices": c, "base": base, "x_values": grid[c["x"]],
               "y_values": grid[c["y"]],
               "values": [[v if np.isfinite(v) else None for v in row] for row in values],
               "status": [[str(v) for v in row] for row in status]}
    if path is None:
        path = EXAMPLE
    with open(path, "w") as f:
        json.dump(example, f, indent=0)
        f.write("\n")
    return example


def read_example() -> dict | None:
    """The shipped example (:func:`write_example`), or None when it cannot be read."""
    try:
        return json.loads(EXAMPLE.read_text())
    except (OSError, ValueError):
        return None


class SweepTab(pn.viewable.Viewer):
    """Pick a model (and path), two settings and their ranges, a metric; run; watch the
    map fill."""

    model = param.Selector(default=PATH_MODEL, objects=list(models.names()),
                           doc="The model swept (the other settings are the live view's).")
    path = param.Selector(default="oscillation", objects=list(PATHS),
                          doc="The feature path of the attention-only model.")
    x = param.Selector(default="beta", objects=sweepable(PATH_MODEL),
                       doc="The setting along the horizontal axis.")
    x_start = param.Number(default=0.3, doc="First value of the horizontal setting.")
    x_end = param.Number(default=3.0, doc="Last value of the horizontal setting.")
    x_log = param.Boolean(default=True, doc="Logarithmic spacing along the horizontal axis.")
    y = param.Selector(default="gamma", objects=sweepable(PATH_MODEL),
                       doc="The setting along the vertical axis.")
    y_start = param.Number(default=0.1, doc="First value of the vertical setting.")
    y_end = param.Number(default=10.0, doc="Last value of the vertical setting.")
    y_log = param.Boolean(default=True, doc="Logarithmic spacing along the vertical axis.")
    cells = param.Integer(default=8, bounds=(1, 64), doc="Values per axis.")
    metric = param.Selector(default="kl_mean", objects=list(METRICS),
                            doc="The metric of each run shown as colour.")
    t_end = param.Number(default=5.0, bounds=(1e-3, 1e4), doc="Final time of every run.")

    def __init__(self, settings: Settings | None = None,
                 on_point: Callable[[dict], object] | None = None, client=None,
                 example: bool = False, **params):
        super().__init__(**params)
        self.settings = settings if settings is not None else Settings()
        self.on_point = on_point
        self.client = client
        self.run: SweepRun | None = None
        self.base: dict | None = None  # the base settings of the map shown
        self._thread: threading.Thread | None = None
        self._doc = None
        self.values: dict[str, np.ndarray] = {}
        self.axes: tuple[list, list] = ([], [])
        self.map_pane = pn.pane.HoloViews(None)
        self.second_pane = pn.pane.HoloViews(None, visible=False)
        self._new_plots()
        self.progress = pn.indicators.Progress(value=0, max=1, width=520)
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.run_button = pn.widgets.Button(label="Run", color="primary")
        self.cancel_button = pn.widgets.Button(label="Cancel", disabled=True)
        self.run_button.on_click(lambda event: self.start())
        self.cancel_button.on_click(lambda event: self.cancel())
        self._layout = None
        self.restarting: threading.Thread | None = None  # workers restarted by a cancel
        if example:
            self.show_example()

    def show_example(self) -> bool:
        """Show the shipped example (:data:`EXAMPLE`) with its choices in the controls;
        False (the map stays empty) when it cannot be read."""
        ex = read_example()
        if ex is None:
            return False
        self.param.update(**ex["choices"])
        self.base = dict(ex["base"])
        self.axes = (list(ex["x_values"]), list(ex["y_values"]))
        values = np.array([[np.nan if v is None else v for v in row] for row in ex["values"]],
                          dtype=float)
        self.values = {ex["choices"]["metric"]: values}
        self.status = np.array(ex["status"], dtype=object)
        self._new_plots()
        self.second_pane.visible = False
        self.progress.visible = False  # (until a sweep of one's own runs)
        self._push()
        self.message.object = EXAMPLE_TEXT
        return True

    # -- choices --------------------------------------------------------------------
    @param.depends("model", watch=True, on_init=True)
    def _model_changed(self):
        names = sweepable(self.model)
        part = models.get(self.model).part
        metrics = [m for m, spec in METRICS.items() if spec.part in (0, part)]
        self.param.x.objects, self.param.y.objects = names, names
        self.param.metric.objects = metrics
        update = {}
        if self.x not in names:
            update["x"] = names[0]
        if self.y not in names or (update.get("x", self.x) == self.y and len(names) > 1):
            update["y"] = next(n for n in names if n != update.get("x", self.x))
        if self.metric not in metrics:
            update["metric"] = metrics[0]
        for axis in ("x", "y"):
            name = update.get(axis)
            if name is not None:
                update[f"{axis}_start"], update[f"{axis}_end"] = default_range(name)
        if update:
            self.param.update(**update)

    def grid(self) -> dict[str, list]:
        """The grid of the chosen axes (checked by :class:`SweepRun`)."""
        if self.x == self.y:
            raise ValueError("choose two different settings")
        return {self.x: axis_values(self.x_start, self.x_end, self.cells, self.x_log),
                self.y: axis_values(self.y_start, self.y_end, self.cells, self.y_log)}

    def metrics(self) -> list[str]:
        """The chosen metric, and the first-order ``T_max`` beside a blow-up map."""
        if self.metric == "blowup_time":
            return ["blowup_time", "first_order_blowup_time"]
        return [self.metric]

    # -- running --------------------------------------------------------------------
    def start(self, wait: bool = False) -> bool:
        """Start a sweep (in a thread; ``wait``: return when it ends). False, with a
        message, when the choices are refused or a sweep is running."""
        if self.running:
            return False
        base = self.settings.values()
        base["model"] = self.model
        if reads_path(self.model):
            base["path"] = self.path
        try:
            grid = self.grid()
            run = SweepRun(Settings(**base), grid, self.t_end, self.metrics(),
                           client=None, on_batch=self._on_batch)
        except ValueError as err:
            self.message.object = f"**Not run:** {err}"
            return False
        self.run, self.base = run, dict(run.base)
        self.axes = (run.grid[self.x], run.grid[self.y])
        shape = (len(self.axes[1]), len(self.axes[0]))
        self.values = {m: np.full(shape, np.nan) for m in run.metrics}
        self.status = np.full(shape, "", dtype=object)
        self.progress.max, self.progress.value, self.progress.visible = run.total, 0, True
        self.message.object = f"running {run.total} points…"
        self.run_button.disabled, self.cancel_button.disabled = True, False
        self._new_plots()
        self.second_pane.visible = "first_order_blowup_time" in self.values
        doc = pn.state.curdoc
        self._doc = doc if getattr(doc, "session_context", None) else None
        self._push()
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def cancel(self) -> None:
        """Cancel the running sweep (its finished cells stay): its pending tasks are
        cancelled and the workers running one of its batches restarted (in a thread:
        :attr:`restarting`), so that no core stays busy with a cancelled sweep."""
        run = self.run
        if run is None:
            return
        tasks = run.tasks  # its tasks on the cluster, while they run
        client, keys = (tasks.client, tasks.keys) if tasks is not None else (None, set())
        busy = []
        if client is not None and keys:
            try:
                busy = [w for w, tasks in client.processing().items() if keys & set(tasks)]
            except Exception:  # the cluster may be closing already
                busy = []
        run.cancel()
        if busy:
            def restart():
                try:
                    client.restart_workers(busy, raise_for_error=False)
                except Exception:  # a worker gone already, a closing cluster
                    pass

            self.restarting = threading.Thread(target=restart, daemon=True)
            self.restarting.start()

    def _work(self) -> None:
        run = self.run
        try:
            # every point on the cluster: a cancel stops a point there (its worker is
            # restarted), not one running in the server's process
            run.client = self.client if self.client is not None else shared_client()
            run.where, run.probe = "cluster", False
            run.run()
            text = (f"cancelled after {run.done} of {run.total} points" if run.cancelled
                    else f"done: {run.total} points")
            failed = sum(r["status"] not in ("completed",) for r in run.results.values())
            if failed:
                text += f" ({failed} diverged or failed: hover for their status)"
        except Exception as err:  # the tab keeps working whatever the cluster does
            text = f"**Sweep failed:** {type(err).__name__}: {err}"
        self._schedule(lambda: self._finished(text))

    def _finished(self, text: str) -> None:
        self.message.object = text
        self.run_button.disabled, self.cancel_button.disabled = False, True

    def _on_batch(self, results, done, total) -> None:
        """From the sweep's thread: store the batch, then redraw on the page's thread."""
        for (i, j), res in results:
            for m in self.values:
                self.values[m][j, i] = res[m]
            self.status[j, i] = res["status"]
        self._schedule(lambda: self._advance(done))

    def _advance(self, done: int) -> None:
        self.progress.value = done
        self._push()

    def _schedule(self, fn: Callable) -> None:
        """Run ``fn`` on the session's next tick, under its document lock and with it as
        Panel's current document (``pn.state.execute``); at once without a server."""
        if self._doc is not None:
            from panel.io.state import set_curdoc

            with set_curdoc(self._doc):
                pn.state.execute(fn, schedule=True)
        else:
            fn()

    # -- the plots ------------------------------------------------------------------
    def _new_plots(self) -> None:
        """Fresh streams and maps for the axes of a new sweep (the settings on the axes,
        their spacing and the metric are fixed for the life of a map)."""
        self.pipe = hv.streams.Pipe(data=self._empty())
        self.theory_pipe = hv.streams.Pipe(data=None)
        self.map = hv.DynamicMap(self._quadmesh, streams=[self.pipe])
        self.tap = hv.streams.Tap(source=self.map, x=None, y=None)
        self.tap.add_subscriber(self._on_tap)
        self.theory = hv.DynamicMap(self._theory_overlay, streams=[self.theory_pipe])
        self.second = hv.DynamicMap(self._second_map, streams=[self.pipe])
        self.map_pane.object = self.map * self.theory
        self.second_pane.object = self.second

    def _empty(self) -> dict:
        xs, ys = self.axes
        x = cell_edges(xs, self.x_log) if xs else np.array([1.0, 2.0])
        y = cell_edges(ys, self.y_log) if ys else np.array([1.0, 2.0])
        blank = np.full((len(y) - 1, len(x) - 1), np.nan)
        return {"x": x, "y": y, "z": blank, "second": blank}

    def _push(self) -> None:
        xs, ys = self.axes
        z = self.values.get(self.metric_shown, np.full((len(ys), len(xs)), np.nan))
        second = self.values.get("first_order_blowup_time")
        self.pipe.send({"x": cell_edges(xs, self.x_log), "y": cell_edges(ys, self.y_log),
                        "z": z.copy(), "second": None if second is None else second.copy()})
        self.theory_pipe.send(self._theory_data())

    @property
    def metric_shown(self) -> str:
        if self.run is not None:
            return self.run.metrics[0]
        return next(iter(self.values), self.metric)

    def _quadmesh(self, data):
        label = self.metric_shown
        z, blank = shown_values(data["z"])
        mesh = hv.QuadMesh((data["x"], data["y"], z), kdims=[self._dim("x"), self._dim("y")],
                           vdims=[hv.Dimension(label, label=label)])
        return mesh.opts(framewise=True, fill_alpha=0.0 if blank else 1.0, tools=["hover", "tap"],
                         colorbar=True, cmap="viridis", logx=self.x_log, logy=self.y_log,
                         width=520, height=440,
                         title=f"{label} (click a cell to load it into the live view)",
                         clipping_colors={"NaN": "#dddddd"}, clim=colour_limits(data["z"]))

    def _second_map(self, data):
        x, y = data["x"], data["y"]
        z = data.get("second")
        if z is None:
            z = np.full((len(y) - 1, len(x) - 1), np.nan)
        z, blank = shown_values(z)
        mesh = hv.QuadMesh((x, y, z), kdims=[self._dim("x"), self._dim("y")],
                           vdims=["first_order_blowup_time"])
        return mesh.opts(framewise=True, fill_alpha=0.0 if blank else 1.0, tools=["hover"],
                         colorbar=True,
                         cmap="viridis", logx=self.x_log, logy=self.y_log, width=520, height=440,
                         title="first-order T_max = min 1/(2 a v s0) (theory)",
                         clipping_colors={"NaN": "#dddddd"}, clim=colour_limits(z))

    def _dim(self, axis: str) -> hv.Dimension:
        name = getattr(self, axis)
        return hv.Dimension(name, label=Settings.param[name].label or name)

    def _theory_data(self):
        """The two-source lag amplitude on a fine grid of the axes, or None."""
        if not (self.base is not None and self.metric_shown == "lag_amplitude"
                and reads_path(self.model) and self.base["path"] == "oscillation"
                and {self.x, self.y} <= set(LAG_SETTINGS)):
            return None
        xs, ys = self.axes
        fx = (np.geomspace if self.x_log else np.linspace)(xs[0], xs[-1], THEORY_CELLS)
        fy = (np.geomspace if self.y_log else np.linspace)(ys[0], ys[-1], THEORY_CELLS)
        X, Y = np.meshgrid(fx, fy)
        values = {k: self.base[k] for k in LAG_SETTINGS}
        values[self.x], values[self.y] = X, Y
        return {"x": fx, "y": fy, "z": two_source_lag_amplitude(
            values["beta"], values["gamma"], values["omega"], values["amplitude"])}

    def _theory_overlay(self, data):
        if data is None or "z" not in data or np.all(np.isnan(data["z"])):
            return hv.Contours([], kdims=[self._dim("x"), self._dim("y")])
        mesh = hv.QuadMesh((data["x"], data["y"], data["z"]),
                           kdims=[self._dim("x"), self._dim("y")], vdims=["theory"])
        return hv.operation.contours(mesh, levels=6).opts(
            color="white", line_dash="dashed", show_legend=False)

    def _on_tap(self, x=None, y=None):
        """A click at ``(x, y)``: load the nearest grid point into the live view."""
        if x is None or y is None or self.base is None or self.on_point is None:
            return
        point = self.point_at(x, y)
        if point is not None:
            self.on_point(point)

    def point_at(self, x: float, y: float) -> dict | None:
        """The settings of the grid cell holding ``(x, y)`` (model and the two axes)."""
        xs, ys = self.axes
        if not xs:
            return None
        ex, ey = cell_edges(xs, self.x_log), cell_edges(ys, self.y_log)
        i, j = np.searchsorted(ex, x) - 1, np.searchsorted(ey, y) - 1
        if not (0 <= i < len(xs) and 0 <= j < len(ys)):
            return None
        point = {"model": self.model, self.x: xs[i], self.y: ys[j]}
        if reads_path(self.model):
            point["path"] = self.base["path"]
        return point

    # -- layout ---------------------------------------------------------------------
    def __panel__(self):
        if self._layout is None:
            controls = pn.Param(
                self.param, parameters=["model", "path", "x", "x_start", "x_end", "x_log", "y",
                                        "y_start", "y_end", "y_log", "cells", "metric",
                                        "t_end"],
                widgets={"cells": pn.widgets.IntInput, "t_end": pn.widgets.FloatInput},
                show_name=False, width=250)
            plots = pn.Row(self.map_pane, self.second_pane)
            self._layout = pn.Row(
                pn.Column(controls, pn.Row(self.run_button, self.cancel_button), width=300,
                          margin=(0, 20, 0, 0)),
                pn.Column(self.progress, self.message, plots, sizing_mode="stretch_width"),
                sizing_mode="stretch_width")
        return self._layout


__all__ = ["SweepTab", "axis_values", "cell_edges", "default_range", "read_example",
           "shared_client", "sweepable", "write_example"]
