"""Compare runs: pin the current run as a ghost that later runs draw over.

"Pin run" keeps a :class:`RunRecord` of the current run (its settings, its curves and
its token paths); later runs draw over it, the pinned run faded and grey, on the KL,
energy and token plots, each legend naming the settings in which the two runs differ
("same seed, β = 1 vs β = 4"). "Clear pinned" forgets them.

A run pinned and then changed would go on from the pinned state, its curve drawn over
the ghost up to the pin and with no ghost beyond it: nothing to compare. So the first
change of a setting after a pin (or a load) restarts the run from t = 0 with the new
settings (:meth:`PinnedRuns.restart_for_comparison`), and the panel says so: both runs
then start from the same state and their curves part where the settings make them part.
Later changes apply mid-run as usual (a quench against a pinned run stays possible).

Pinned runs are saved to and loaded from one NetCDF file (:func:`to_netcdf`,
:func:`from_netcdf`) that carries each run's settings, so a comparison prepared before
a class opens in it.

File layout (NetCDF 3, written by xarray with SciPy's engine like the run's download,
:mod:`app.mainview.export`): global attributes ``format`` (:data:`FORMAT`), ``version`` and
``runs``; per run ``i`` the attribute ``run{i}_settings`` (the settings as JSON), the
coordinate ``run{i}_time`` and the variables ``run{i}_<curve>`` (one per
:data:`CURVES`, NaN where the model does not define it) and ``run{i}_features``
(time, token, feature). Runs keep their own dimensions: they may differ in N, d and
length.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass

import numpy as np

from app.mainview.ranges import LOG_FLOOR
from dynamics import Settings

#: The ``format`` attribute of a pinned-runs file.
FORMAT = "attention-dynamics pinned runs"
#: Version of the file layout.
VERSION = 1
#: The diagnostics a pinned run keeps (what its ghosts and a slide draw).
CURVES = ("kl", "kl_bound", "hamiltonian", "potential", "work", "dissipated",
          "energy_residual", "dissipation_rate", "momentum_energy")
#: Frames a pinned run keeps (evenly spread; the first and last always).
MAX_FRAMES = 400
#: Pinned runs kept at once (pinning one more forgets the oldest).
MAX_PINNED = 3
#: How a setting is named in a settings line (else its label before " (", else its name).
_SHORT = {"init_attention": "A(0)", "init_momentum": "P(0)", "path": "path", "seed": "seed",
          "n_tokens": "N", "dim": "d", "dt": "dt"}


def _short_name(name: str) -> str:
    if name in _SHORT:
        return _SHORT[name]
    label = Settings.param[name].label or name
    return label.split(" (")[0] if " (" in label else name


def _format_value(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def used_settings(values: dict) -> dict:
    """The settings of ``values`` that its model (and path) uses, in the controls' order.

    Parameters
    ----------
    values : dict
        Every setting, ``{name: value}``.

    Returns
    -------
    dict
        :func:`app.settings_io.used_settings` of these values (``model`` first).
    """
    from app.settings_io import used_settings as used

    return used(Settings(**values))


def settings_line(values: dict, names=None) -> str:
    """One line naming the settings, e.g. ``"canonical · β = 1 · γ = 1 · N = 8 · …"``.

    Parameters
    ----------
    values : dict
        Every setting of a run.
    names : iterable of str, optional
        Only these settings (default: those the model uses, :func:`used_settings`).

    Returns
    -------
    str
    """
    used = used_settings(values)
    names = list(used) if names is None else list(names)
    parts = [str(values["model"])] if "model" in names else []
    parts += [f"{_short_name(k)} = {_format_value(values[k])}" for k in names if k != "model"]
    return " · ".join(parts)


def differing(a: dict, b: dict) -> list[str]:
    """The settings in which runs ``a`` and ``b`` differ, among those either uses.

    Returns
    -------
    list of str
        In the controls' order (``model`` first when it differs).
    """
    names = list(dict.fromkeys([*used_settings(a), *used_settings(b)]))
    return [k for k in names if a.get(k) != b.get(k)]


def comparison_labels(pinned: dict, current: dict) -> tuple[str, str]:
    """Legend lines of a pinned run and of the current one: the settings in which they
    differ (``("β = 1", "β = 4")``), or ``"same settings"`` for both."""
    names = differing(pinned, current)
    if not names:
        return "same settings", "same settings"
    return settings_line(pinned, names), settings_line(current, names)


@dataclass(frozen=True, eq=False)
class RunRecord:
    """What a pinned run (or a slide) keeps of one run.

    Attributes
    ----------
    settings : dict
        Every setting of the run, ``{name: value}``.
    times : ndarray, shape (T,)
    curves : dict of str to ndarray, shape (T,)
        The diagnostics of :data:`CURVES` (NaN where the model does not define one).
    features : ndarray, shape (T, N, d)
        The token features at those times.
    """

    settings: dict
    times: np.ndarray
    curves: dict
    features: np.ndarray

    @classmethod
    def from_frames(cls, settings, frames, max_frames: int | None = MAX_FRAMES) -> RunRecord:
        """The record of ``frames`` (a run's :class:`dynamics.Frame` s, in time order).

        Parameters
        ----------
        settings : dynamics.Settings or dict
        frames : sequence of dynamics.Frame
            At least one.
        max_frames : int or None
            Keep at most this many frames, evenly spread, the first and last always
            (None: all).
        """
        frames = list(frames)
        if not frames:
            raise ValueError("no frames to record: the run has not started")
        keep = _spread(len(frames), max_frames)
        frames = [frames[i] for i in keep]
        values = settings.values() if isinstance(settings, Settings) else dict(settings)
        return cls(
            settings=values,
            times=np.array([f.t for f in frames], dtype=float),
            curves={k: np.array([f.diagnostics.get(k, math.nan) for f in frames], dtype=float)
                    for k in CURVES},
            features=np.stack([f.features for f in frames]).astype(float),
        )

    @property
    def model(self) -> str:
        return self.settings["model"]

    @property
    def line(self) -> str:
        """The run's settings line (:func:`settings_line`)."""
        return settings_line(self.settings)

    def energy_change(self) -> np.ndarray:
        """``H(t) − H(0)`` (the model's energy of the balance), shape (T,)."""
        h = self.curves["hamiltonian"]
        return h - h[0]


def _spread(n: int, most: int | None) -> np.ndarray:
    """Indices of at most ``most`` of ``n`` items, evenly spread, first and last kept."""
    if most is None or n <= most:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max(most, 2))).astype(int))


# -- the file ------------------------------------------------------------------
def to_dataset(runs):
    """The pinned ``runs`` (sequence of :class:`RunRecord`) as one ``xarray.Dataset``."""
    import xarray as xr

    data, coords = {}, {}
    attrs = {"format": FORMAT, "version": VERSION, "runs": len(runs)}
    for i, run in enumerate(runs):
        p = f"run{i}_"
        coords[p + "time"] = run.times
        for k in CURVES:
            data[p + k] = (p + "time", run.curves[k])
        data[p + "features"] = ((p + "time", p + "token", p + "feature"), run.features)
        attrs[p + "settings"] = json.dumps(run.settings)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def to_netcdf(runs) -> bytes:
    """The bytes of a NetCDF 3 file of the pinned ``runs`` (see the module's layout)."""
    return bytes(to_dataset(runs).to_netcdf(engine="scipy"))


def from_netcdf(payload: bytes) -> list[RunRecord]:
    """The pinned runs of a file written by :func:`to_netcdf`.

    Parameters
    ----------
    payload : bytes
        The file's content.

    Returns
    -------
    list of RunRecord

    Raises
    ------
    ValueError
        The bytes are not a NetCDF file, or not one of pinned runs, or a run's data or
        settings are missing or invalid (the message says which).
    """
    import xarray as xr

    try:
        with xr.open_dataset(io.BytesIO(bytes(payload)), engine="scipy") as ds:
            ds = ds.load()
    except Exception as err:  # the engine's errors vary with the damage
        raise ValueError(f"not a NetCDF file of pinned runs ({type(err).__name__}: {err})") \
            from None
    if ds.attrs.get("format") != FORMAT:
        raise ValueError(f"not a file of pinned runs: its format attribute is "
                         f"{ds.attrs.get('format')!r}, expected {FORMAT!r}")
    try:
        n = int(ds.attrs["runs"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("file of pinned runs without a valid 'runs' attribute") from None
    return [_read_run(ds, i) for i in range(n)]


def _read_run(ds, i: int) -> RunRecord:
    p = f"run{i}_"
    missing = [p + k for k in (*CURVES, "features") if p + k not in ds]
    if p + "settings" not in ds.attrs:
        missing.append(f"attribute {p}settings")
    if missing:
        raise ValueError(f"pinned run {i}: missing {', '.join(missing)}")
    try:
        mapping = json.loads(ds.attrs[p + "settings"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"pinned run {i}: its settings are not JSON ({err})") from None
    values, problems = Settings.check(mapping, require_all=True)
    if problems:
        raise ValueError(f"pinned run {i}: invalid settings:\n- " + "\n- ".join(problems))
    times = np.asarray(ds[p + "time"].values, dtype=float)
    features = np.asarray(ds[p + "features"].values, dtype=float)
    if len(times) == 0 or not np.all(np.isfinite(times)) or features.ndim != 3 \
            or not np.all(np.isfinite(features)):
        raise ValueError(f"pinned run {i}: no frames, or non-finite times or features")
    return RunRecord(settings=Settings(**values).values(), times=times,
                     curves={k: np.asarray(ds[p + k].values, dtype=float) for k in CURVES},
                     features=features)


def safe_filename(text: str) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-`` (a file name part)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


# -- the dashboard's ghosts ----------------------------------------------------
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
            keep = _spread(len(run.times), PATH_FRAMES)
            self.paths[i].data = {"xs": [xy[keep, j, 0] for j in range(xy.shape[1])],
                                  "ys": [xy[keep, j, 1] for j in range(xy.shape[1])]}
            self.ends[i].data = {"x": xy[-1, :, 0], "y": xy[-1, :, 1]}
            lows.append(xy.reshape(-1, 2).min(axis=0))
            highs.append(xy.reshape(-1, 2).max(axis=0))
        ts.ghost_extent = {fig: (min(e[0] for e in ex), max(e[1] for e in ex),
                                 min(e[2] for e in ex), max(e[3] for e in ex))
                           for fig, ex in extents.items() if ex}
        ts._fit_ranges()
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


#: The diagnostic of :data:`CURVES` each ghost column draws.
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
