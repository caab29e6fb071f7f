"""Compare runs: pin the current run as a ghost that later runs draw over.

"Pin run" keeps a :class:`app.teaching.run_record.RunRecord` of the current run (its
settings, its curves and its token paths); later runs draw over it, the pinned run faded
and grey, on the KL, energy and token plots, each legend naming the settings in which the
two runs differ ("same seed, β = 1 vs β = 4"). "Clear pinned" forgets them.

A run pinned and then changed would go on from the pinned state, its curve drawn over
the ghost up to the pin and with no ghost beyond it: nothing to compare. So the first
change of a setting after a pin (or a load) restarts the run from t = 0 with the new
settings (:meth:`PinnedRuns.restart_for_comparison`), and the panel says so: both runs
then start from the same state and their curves part where the settings make them part.
Later changes apply mid-run as usual (a quench against a pinned run stays possible).

Pinned runs are saved to and loaded from one NetCDF file
(:func:`app.teaching.run_record.to_netcdf`, whose module gives the file's layout), so a
comparison prepared before a class opens in it.
"""

from __future__ import annotations

import io

import numpy as np

from app.mainview.ranges import LOG_FLOOR
from dynamics import Settings

from .run_record import RunRecord, comparison_labels, from_netcdf, spread, to_netcdf

#: Pinned runs kept at once (pinning one more forgets the oldest).
MAX_PINNED = 3
#: Colour of the pinned runs' ghosts, and their line dashes (one per pinned run).
GHOST_COLOR = "#7f7f7f"
GHOST_DASHES = ("solid", "dotdash", "dotted")
#: Frames of a ghost's token paths on the token plot.
PATH_FRAMES = 100


class PinnedRuns:
    """The pinned runs of a dashboard, drawn as ghosts on its KL, energy and token plots.

    Each of at most :data:`MAX_PINNED` slots owns a few Bokeh renderers, made when a
    run is first pinned in it and hidden when it is cleared: later pins, clears and
    loads change their data and legend labels, adding no models to the page. A ghost's
    legend names the settings in which it differs from the current run, and the
    legend's title those of the current run (:func:`comparison_labels`), kept up to
    date as settings change and at each new run (:meth:`draw`, called by the dashboard's ``reset``).

    Parameters
    ----------
    dashboard : app.dashboard.Dashboard
        Its ``settings``, ``history``, ``timeseries``, ``trajectories`` and ``notice``.
    """

    def __init__(self, dashboard):
        self.dashboard = dashboard
        self.runs: list[RunRecord] = []
        self._compare_next = False  # a pin waits for the change that restarts the run
        self.note = None  # the panel's line about the restart (made by :meth:`panel`)
        ts = dashboard.timeseries
        self.figures = (ts.fig_kl, ts.fig_kl_log, ts.fig_energy)
        # per slot, made at its first use (a session that pins nothing pays nothing)
        self.curves, self.paths, self.ends = [], [], []
        self.renderers, self.items = [], []  # a slot's renderers and legend items
        dashboard.settings.param.watch(lambda *events: self.relabel(), Settings.names())

    def _add_slot(self) -> None:
        """The sources, hidden renderers and legend items of one more pinned run."""
        from bokeh.models import ColumnDataSource, LegendItem

        ts, tr = self.dashboard.timeseries, self.dashboard.trajectories
        i = len(self.curves)
        src = ColumnDataSource({k: [] for k in ("t", "kl", "kl_log", "kl_bound",
                                                 "kl_bound_log", "d_energy")})
        paths, ends = ColumnDataSource({"xs": [], "ys": []}), ColumnDataSource({"x": [], "y": []})
        renderers, items = [], []
        style = dict(source=src, color=GHOST_COLOR, line_dash=GHOST_DASHES[i], visible=False)
        for fig, column in ((ts.fig_kl, "kl"), (ts.fig_kl_log, "kl_log"),
                            (ts.fig_energy, "d_energy")):
            r = fig.line("t", column, line_width=2.5, alpha=0.55, **style)
            renderers.append(r)
            item = LegendItem(label=f"pinned {i + 1}", renderers=[r], visible=False)
            fig.legend[0].items.append(item)
            items.append(item)
            if column != "d_energy":
                renderers.append(fig.line(
                    "t", column.replace("kl", "kl_bound"), line_width=1.5, alpha=0.4,
                    **{**style, "line_dash": "dashed"}))
        renderers.append(tr.fig.multi_line(
            "xs", "ys", source=paths, line_color=GHOST_COLOR, line_alpha=0.45,
            line_dash="dashed", line_width=1.2, visible=False))
        renderers.append(tr.fig.scatter(
            "x", "y", source=ends, size=10, fill_color=None,
            line_color=GHOST_COLOR, line_alpha=0.8, visible=False))
        self.curves.append(src)
        self.paths.append(paths)
        self.ends.append(ends)
        self.renderers.append(renderers)
        self.items.append(items)

    # -- actions ---------------------------------------------------------------
    def pin(self) -> RunRecord:
        """Keep the current run (its recorded frames) as a ghost; the oldest of more
        than :data:`MAX_PINNED` is forgotten."""
        d = self.dashboard
        record = RunRecord.from_frames(d.settings, list(d.history))
        self.runs = [*self.runs, record][-MAX_PINNED:]
        self.draw()
        self._compare_next = True
        self._say("")
        return record

    def restart_for_comparison(self) -> bool:
        """Whether a setting's change restarts the run: the first change after a pin
        (or a load) of a run already under way does, so that the two runs start from the
        same state (the dashboard then resets). Asked once per change."""
        if not (self._compare_next and self.runs):
            return False
        self._compare_next = False
        if self.dashboard.sim.t == 0:
            return False
        self._say("The run restarted from t = 0 with the new settings: a change after "
                  "pinning starts a new run, compared with the pinned one from the same "
                  "start (later changes apply mid-run).")
        return True

    def _say(self, text: str) -> None:
        if self.note is not None:
            self.note.object = text

    def clear(self) -> None:
        """Forget every pinned run."""
        self.runs = []
        self.draw()
        self._compare_next = False
        self._say("")

    def save(self) -> bytes:
        """The pinned runs as a NetCDF file (:func:`to_netcdf`)."""
        if not self.runs:
            raise ValueError("no pinned runs to save: pin a run first")
        return to_netcdf(self.runs)

    def load(self, payload: bytes) -> list[RunRecord]:
        """Pin the runs of a file written by :meth:`save` (after those pinned).

        Raises
        ------
        ValueError
            :func:`from_netcdf`'s: the file is not one of pinned runs, or is damaged.
        """
        runs = from_netcdf(payload)
        self.runs = [*self.runs, *runs][-MAX_PINNED:]
        self.draw()
        self._compare_next = True
        return runs

    # -- drawing ---------------------------------------------------------------
    def relabel(self) -> None:
        """The legends: each ghost's settings where it differs from the current run's,
        and the current run's in the legend's title."""
        from bokeh.core.properties import value

        if not self.items:
            return  # nothing pinned yet
        current = self.dashboard.settings.values()
        titles = []
        for i, items in enumerate(self.items):
            if i >= len(self.runs):
                continue
            ghost, now = comparison_labels(self.runs[i].settings, current)
            titles.append(now)
            for item in items:
                item.label = value(f"pinned: {ghost}")
        title = f"this run: {' | '.join(dict.fromkeys(titles))}" if titles else None
        for fig in self.figures:
            fig.legend[0].title = title

    def draw(self) -> None:
        """Show the pinned runs (hide the empty slots), projected on the current run's
        token axes, and fit the plots' ranges to them."""
        ts, tr = self.dashboard.timeseries, self.dashboard.trajectories
        extents = {fig: [] for fig in self.figures}
        lows, highs = [], []
        while len(self.curves) < len(self.runs):
            self._add_slot()
        for i in range(len(self.curves)):
            run = self.runs[i] if i < len(self.runs) else None
            for r in self.renderers[i]:  # a curve the pinned model lacks (all NaN) is hidden
                r.visible = run is not None and _defined(run, getattr(r.glyph, "y", None))
            for item in self.items[i]:
                item.visible = run is not None
            if run is None:
                for src in (self.curves[i], self.paths[i], self.ends[i]):
                    src.data = {k: [] for k in src.data}
                continue
            c = run.curves
            data = {"t": run.times, "kl": _zeroed(c["kl"]),
                    "kl_log": np.maximum(_zeroed(c["kl"]), LOG_FLOOR),
                    "kl_bound": _zeroed(c["kl_bound"]),
                    "kl_bound_log": np.maximum(_zeroed(c["kl_bound"]), LOG_FLOOR),
                    "d_energy": _zeroed(run.energy_change())}
            self.curves[i].data = data
            t0, t1 = float(run.times[0]), float(run.times[-1])
            for fig, keys in ((ts.fig_kl, ("kl", "kl_bound")),
                              (ts.fig_kl_log, ("kl_log", "kl_bound_log")),
                              (ts.fig_energy, ("d_energy",))):
                keys = [k for k in keys if _defined(run, k)]
                if not keys:
                    continue
                values = np.concatenate([data[k] for k in keys])
                extents[fig].append((t0, t1, float(values.min()), float(values.max())))
            xy = self._project(run)
            keep = spread(len(run.times), PATH_FRAMES)
            self.paths[i].data = {"xs": [xy[keep, j, 0] for j in range(xy.shape[1])],
                                  "ys": [xy[keep, j, 1] for j in range(xy.shape[1])]}
            self.ends[i].data = {"x": xy[-1, :, 0], "y": xy[-1, :, 1]}
            lows.append(xy.reshape(-1, 2).min(axis=0))
            highs.append(xy.reshape(-1, 2).max(axis=0))
        ts.ghost_extent = {fig: (min(e[0] for e in ex), max(e[1] for e in ex),
                                 min(e[2] for e in ex), max(e[3] for e in ex))
                           for fig, ex in extents.items() if ex}
        ts.fit_ranges()
        if lows:
            lo, hi = np.min(lows, axis=0), np.max(highs, axis=0)
            for rng, a, b in ((tr.fig.x_range, lo[0], hi[0]), (tr.fig.y_range, lo[1], hi[1])):
                pad = 0.1 * max(b - a, 1e-6)
                rng.update(start=min(rng.start, a - pad), end=max(rng.end, b + pad))
        self.relabel()

    def _project(self, run: RunRecord) -> np.ndarray:
        """The pinned run's token paths (T, N, 2) on the current run's principal axes
        (its own when N or d differ)."""
        from app.mainview.trajectories import principal_axes

        tr = self.dashboard.trajectories
        if tr.axes is not None and tr.axes.shape[1] == run.features.shape[2] \
                and tr.buffer is not None and tr.buffer.shape[1] == run.features.shape[1]:
            mean, axes = tr.mean, tr.axes
        else:
            mean, axes = principal_axes(run.features[0])
        return (run.features - mean) @ axes.T

    # -- widgets ---------------------------------------------------------------
    def panel(self):
        """The sidebar's "Compare runs" box: Pin run, Clear pinned, Save and Load."""
        import panel as pn

        from app.mainview.export import filename
        from app.serving.server import locked

        pin = pn.widgets.Button(label="Pin run", color="primary", width=125)
        clear = pn.widgets.Button(label="Clear pinned", width=125)
        save = pn.widgets.FileDownload(filename="pinned.nc", label="Save pinned",
                                       color="default", width=135, disabled=True)
        load = pn.widgets.FileInput(accept=".nc", multiple=False, width=270)
        listing = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        # the file picker says what it takes, and what became of a file is said under it
        load_label = pn.pane.Markdown("Pinned runs file (`.nc`, from *Save pinned*):",
                                      margin=(0, 10))
        self.load_note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self.note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10),
                                     styles={"font-style": "italic"})

        def refresh():
            save.disabled = not self.runs
            listing.object = "\n".join(f"- pinned {i + 1}: {r.line}"
                                       for i, r in enumerate(self.runs))

        def on_pin(event):
            self.pin()
            refresh()

        def on_clear(event):
            self.clear()
            refresh()

        def on_save():
            save.filename = "pinned_" + filename(self.dashboard, "nc")
            return io.BytesIO(self.save())

        def on_load(event):
            if event.new is None:
                return
            try:
                self.load(event.new)
                self.load_note.object = f"Loaded: {len(self.runs)} pinned run(s)."
            except ValueError as err:
                self.load_note.object = f"**Pinned runs not loaded:** {err}"
            refresh()

        # they change Bokeh models: run under the document lock (app.serving.server.locked)
        pin.on_click(locked(on_pin))
        clear.on_click(locked(on_clear))
        save.callback = on_save
        load.param.watch(locked(on_load), "value")
        self.buttons = {"pin": pin, "clear": clear, "save": save, "load": load}
        return pn.Column(pn.pane.Markdown("**Compare runs** (pinned runs drawn grey)",
                                          margin=(0, 10)),
                         pn.Row(pin, clear), self.note, pn.Row(save), load_label, load,
                         self.load_note, listing,
                         sizing_mode="stretch_width")


#: The diagnostic of :data:`app.teaching.run_record.CURVES` each ghost column draws.
_CURVE_OF = {"kl": "kl", "kl_log": "kl", "kl_bound": "kl_bound", "kl_bound_log": "kl_bound",
             "d_energy": "hamiltonian"}


def _defined(run: RunRecord, column) -> bool:
    """False when the ghost column ``column`` draws a diagnostic the pinned run's model
    does not define (all NaN, e.g. the tracking bound of value matching): drawn as 0 it
    would be a false curve and stretch the log plot down to its floor."""
    curve = _CURVE_OF.get(column)
    return curve is None or bool(np.any(np.isfinite(run.curves[curve])))


def _zeroed(v: np.ndarray) -> np.ndarray:
    """``v`` with its non-finite entries as 0 (the page draws finite numbers only)."""
    return np.where(np.isfinite(v), v, 0.0)
