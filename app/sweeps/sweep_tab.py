"""The Sweep tab: a phase diagram of one metric over two settings (``dynamics.sweep``).

A view only. "Run" starts a :class:`dynamics.SweepRun` (grid) or an
:class:`~dynamics.sweeps.AdaptiveRun` ("adaptive": a quarter of the points on a uniform
grid first, the rest placed round after round where the metric changes fastest, drawn as
they arrive on a map interpolated between them, the points shown) of the current settings (the live
view's, with the model chosen here) over two settings and their ranges on
``dask.distributed`` (one embedded ``LocalCluster`` per server process, shared by the
sessions and kept for the next sweep), in a thread of its own; each finished batch fills
its cells of the map (a HoloViews ``QuadMesh`` fed by a ``Pipe``), the progress bar
advances, and "Cancel" stops the sweep. Hovering a cell names the run a click on it
loads into the live view (``on_point``): the grid point of the cell, or on an adaptive
map the sampled point nearest the cell. "Download NetCDF" and "Download CSV" export the
map shown (:mod:`app.sweeps.export`).

The tab never opens empty: it shows a shipped example (:mod:`app.sweeps.example`, the lag
amplitude of the attention-only model on the oscillation path over β × γ with the
theory's contours), its choices in the controls, and says how to run one's own.

"Cancel" cancels the sweep's pending tasks and restarts the workers still running one
of its batches (a running task cannot be interrupted otherwise: it kept a core busy
for up to a minute); another sweep's tasks on those workers are run again elsewhere.

Theory drawn over the map (Theory page): on a ``lag_amplitude`` sweep of the
oscillation path, contours of the two-source lag amplitude ``βδω/√(λ² + ω²)``; on a
``blowup_time`` sweep, the first-order ``T_max`` as a second map beside it (the maps:
:mod:`app.sweeps.maps`; the axes: :mod:`app.sweeps.grid`; the cluster:
:mod:`app.sweeps.cluster`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import panel as pn
import param

from dynamics import PATHS, Settings, SweepRun, models
from dynamics.sweeps import METRICS, AdaptiveRun

from .cluster import cancel_sweep, shared_client
from .example import EXAMPLE_CHOICES, EXAMPLE_TEXT, example_grid, read_example, write_example
from .export import download_buttons
from .grid import (
    PATH_MODEL,
    axis_values,
    cell_edges,
    default_range,
    kept_choices,
    model_metrics,
    reads_path,
    sweepable,
)
from .tab_maps import SweepMaps


class SweepTab(SweepMaps, pn.viewable.Viewer):
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
    sampler = param.Selector(default="grid", objects=["grid", "adaptive"],
                             doc="grid: cells × cells points; adaptive: a quarter of the "
                                 "points on a uniform grid first, the rest placed one round "
                                 "after the other where the metric changes fastest")
    cells = param.Integer(default=8, bounds=(1, 64), doc="Values per axis (grid).")
    points = param.Integer(default=64, bounds=(4, 1024), doc="Points in all (adaptive).")
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
        self.sampled: dict[int, dict] = {}  # an adaptive sweep's results so far, by point
        self.example: dict | None = None  # the shipped example, while it is shown
        self.axes: tuple[list, list] = ([], [])
        self.map_pane = pn.pane.HoloViews(None)
        self.second_pane = pn.pane.HoloViews(None, visible=False)
        self._new_plots()
        self.progress = pn.indicators.Progress(value=0, max=1, width=520)
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.run_button = pn.widgets.Button(label="Run", color="primary")
        self.cancel_button = pn.widgets.Button(label="Cancel", disabled=True)
        self.downloads = download_buttons(self.dataset)
        self.run_button.on_click(lambda event: self.start())
        self.cancel_button.on_click(lambda event: self.cancel())
        self._layout = None
        self.restarting: threading.Thread | None = None  # workers restarted by a cancel
        if example:
            self.show_example()

    def show_example(self) -> bool:
        """Show the shipped example (:data:`~app.sweeps.example.EXAMPLE`) with its choices
        in the controls; False (the map stays empty) when it cannot be read."""
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
        self.run, self.example = None, ex
        self._new_plots()
        self.second_pane.visible = False
        self.progress.visible = False  # (until a sweep of one's own runs)
        self._push()
        self.message.object = EXAMPLE_TEXT
        return True

    # -- choices --------------------------------------------------------------------
    @param.depends("model", watch=True, on_init=True)
    def _model_changed(self):
        names, metrics = sweepable(self.model), model_metrics(self.model)
        self.param.x.objects, self.param.y.objects = names, names
        self.param.metric.objects = metrics
        update = kept_choices(names, metrics, self.x, self.y, self.metric)
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
            if self.sampler == "adaptive":
                ranges = {self.x: (self.x_start, self.x_end, "log" if self.x_log else "lin"),
                          self.y: (self.y_start, self.y_end, "log" if self.y_log else "lin")}
                run = AdaptiveRun(Settings(**base), ranges, self.points, self.t_end,
                                  self.metrics(), on_batch=self._on_batch)
            else:
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
        self.sampled = {}
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
            self.wait()
        return True

    @property
    def running(self) -> bool:
        """A sweep is running (its thread has not ended)."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running sweep to end (at most ``timeout`` seconds); True when no
        sweep is running."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def cancel(self) -> None:
        """Cancel the running sweep (its finished cells stay): its pending tasks are
        cancelled and the workers running one of its batches restarted (in a thread:
        :attr:`restarting`), so that no core stays busy with a cancelled sweep."""
        if self.run is None:
            return
        restarting = cancel_sweep(self.run)
        if restarting is not None:
            self.restarting = restarting

    def _work(self) -> None:
        run = self.run
        try:
            # every point on the cluster: a cancel stops a point there (its worker is
            # restarted), not one running in the server's process
            run.client = self.client if self.client is not None else shared_client()
            run.where = "cluster"
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
        if self.adaptive:
            self.sampled.update((k, res) for (k,), res in results)
            self._schedule(lambda: self._advance(done))
            return
        for (i, j), res in results:
            for m in self.values:
                self.values[m][j, i] = res[m]
            self.status[j, i] = res["status"]
        self._schedule(lambda: self._advance(done))

    def _advance(self, done: int) -> None:
        self._push()  # (the progress says what the map shows)
        self.progress.value = done

    def _schedule(self, fn: Callable) -> None:
        """Run ``fn`` on the session's next tick, under its document lock and with it as
        Panel's current document (``pn.state.execute``); at once without a server."""
        if self._doc is not None:
            from panel.io.state import set_curdoc

            with set_curdoc(self._doc):
                pn.state.execute(fn, schedule=True)
        else:
            fn()

    # -- layout ---------------------------------------------------------------------
    def __panel__(self):
        if self._layout is None:
            controls = pn.Param(
                self.param, parameters=["model", "path", "x", "x_start", "x_end", "x_log", "y",
                                        "y_start", "y_end", "y_log", "sampler", "cells",
                                        "points", "metric", "t_end"],
                widgets={"cells": pn.widgets.IntInput, "points": pn.widgets.IntInput,
                         "t_end": pn.widgets.FloatInput,
                         "sampler": pn.widgets.RadioButtonGroup},
                show_name=False, width=250)
            plots = pn.Row(self.map_pane, self.second_pane)
            self._layout = pn.Row(
                pn.Column(controls, pn.Row(self.run_button, self.cancel_button),
                          pn.Row(*self.downloads), width=300, margin=(0, 20, 0, 0)),
                pn.Column(self.progress, self.message, plots, sizing_mode="stretch_width"),
                sizing_mode="stretch_width")
        return self._layout


__all__ = ["EXAMPLE_CHOICES", "SweepTab", "axis_values", "cell_edges", "default_range",
           "example_grid", "read_example", "shared_client", "sweepable", "write_example"]
