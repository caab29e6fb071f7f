"""A run as a page to take home: A(t) beside A*(t) and the lag map, the KL lag with its
tracking bound, the energy balance with its residual and the tokens, with a time slider
and Play that move every plot together, in one HTML file that needs no Python, no server
and no network (Theory page: tracking the moving softmax, energy balance).

The plots are the dashboard's own (:class:`app.mainview.heatmaps.Heatmaps`,
:class:`app.mainview.timeseries.TimeSeries`, :class:`app.mainview.trajectories.Trajectories`:
same titles, colours and legends), filled once with the whole run; the recorded frames,
thinned to :data:`MAX_FRAMES` and stored as float32, sit in one data source of the page
(:data:`FRAMES_NAME`) from which a ``CustomJS`` callback copies the frame of the slider
into the maps, the tokens, the time markers and the lag marker. The page itself (KaTeX,
fonts, the settings and the model's equations) is :mod:`app.teaching.standalone_page`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, CustomJS, Span

from app.mainview.heatmaps import HIGHLIGHT, SCALES, Heatmaps, log_ratio, scale_limits
from app.mainview.real_heads import label_axes
from app.mainview.timeseries import COLUMNS, TimeSeries
from app.mainview.trajectories import Trajectories, principal_axes
from app.models import spec
from dynamics.noise import small_noise_kl, stationary_variance

from .run_record import spread

#: Most frames a page keeps (evenly spread, the first and last always): a slider needs
#: no more, and the file stays small (a default run: about 1.5 MB).
MAX_FRAMES = 200
#: Width of the token plot (beside the KL and energy plots: the page fits 1280 px).
TOKENS_WIDTH = 380
#: Milliseconds between frames while the page plays.
PLAY_MS = 80
#: Names of the page's Bokeh models (the browser tests read them).
FRAMES_NAME, LAG_NAME = "page_frames", "page_lag"
MAP_NAMES = ("page_attention", "page_softmax", "page_ratio")
TOKENS_NAME, TIME_NAME = "page_tokens", "page_time"
#: Ids of the page's own controls: the time slider, Play and the readout line (plain HTML
#: elements: Bokeh's widgets would add 0.4 MB of script to every page).
SLIDER_ID, PLAY_ID, READOUT_ID = "page-time", "page-play", "page-readout"

#: Page script run when the lag marker's source's ``tags`` become ``[k]`` (the page's
#: clock: a model the plots reach, so the frames and this script come with it): show frame ``k``
#: everywhere (the maps and their colour limits, the lag map ``log(A/A*)`` computed here,
#: the tokens, the time lines, the lag marker and the readout).
SHOW_FRAME = """
const k = lag.tags[0];
const d = frames.data;
if (maps.length) {
  const A = d.A[k], S = (d.S || d.A)[k], n = Math.round(Math.sqrt(A.length));
  maps[0].data = {image: [A], frame: [k]};
  maps[1].data = {image: [S]};
  if (d.S) {
    const R = new A.constructor(n * n, [n, n]);  // BokehJS's float32 array, of shape n × n
    for (let i = 0; i < n * n; i++)
      R[i] = Math.log(Math.max(A[i], 1e-300)) - Math.log(Math.max(S[i], 1e-300));
    maps[2].data = {image: [R]};
  }
  for (const m of mappers) if (m.low !== d.low[k] || m.high !== d.high[k])
    m.setv({low: d.low[k], high: d.high[k]});
  for (const m of ratio_mappers) if (m.high !== d.top[k])
    m.setv({low: -d.top[k], high: d.top[k]});
}
const nd = {};
for (const key of Object.keys(dots.data)) nd[key] = dots.data[key];
nd.x = d.x[k]; nd.y = d.y[k];
dots.data = nd;
for (const s of spans) s.location = d.t[k];
lag.data = {t: [d.t[k]], kl: [d.kl[k]]};
const f = (v) => Number.isFinite(v) ? v.toPrecision(4) : "n/a";
const line = document.getElementById(readout);
if (line) line.textContent = `t = ${d.t[k].toFixed(3)} · frame ${k + 1} of ${d.t.length} · ` +
  `Σ KL = ${f(d.kl_raw[k])} · bound = ${f(d.bound[k])} · ` +
  `energy change = ${f(d.d_energy[k])} · residual = ${f(d.residual[k])}`;
"""
#: Page script of the slider and Play / Pause (Play steps the slider every ``MS``
#: milliseconds to its end): each frame shown sets the clock's ``tags`` (:data:`SHOW_FRAME`).
PLAYER = """
(() => {
  const input = document.getElementById("%(slider)s");
  const button = document.getElementById("%(play)s");
  if (!input || !button) return;
  const show = () => {
    const doc = window.Bokeh && Bokeh.documents.length ? Bokeh.documents[0] : null;
    const clock = doc ? doc.get_model_by_name("%(clock)s") : null;
    if (clock) clock.tags = [Number(input.value)];
  };
  input.addEventListener("input", show);
  let timer = null;
  const stop = () => { clearInterval(timer); timer = null; button.textContent = "▶ Play"; };
  button.addEventListener("click", () => {
    if (timer) { stop(); return; }
    if (Number(input.value) >= Number(input.max)) input.value = 0;
    button.textContent = "❚❚ Pause";
    timer = setInterval(() => {
      if (Number(input.value) >= Number(input.max)) { stop(); return; }
      input.value = Number(input.value) + 1;
      show();
    }, %(ms)d);
  });
})();
"""


def player_html(run: PageRun) -> str:
    """The slider, Play and the readout line of ``run``'s page, and their script."""
    n = len(run.times)
    disabled = " disabled" if n < 2 else ""
    first = _readout(run)
    script = PLAYER % {"slider": SLIDER_ID, "play": PLAY_ID, "clock": LAG_NAME,
                       "ms": PLAY_MS}
    return (f'<div class="player"><button id="{PLAY_ID}" type="button"{disabled}>▶ Play'
            f'</button><label>time <input id="{SLIDER_ID}" type="range" min="0" '
            f'max="{max(n - 1, 0)}" step="1" value="0"{disabled} '
            f'aria-label="frame of the run shown"></label></div>'
            f'<div id="{READOUT_ID}" class="readout">{first}</div>'
            f"<script>{script}</script>")


@dataclass
class PageRun:
    """What a page shows of one run.

    Attributes
    ----------
    settings : dict
        Every setting of the run.
    times : ndarray, shape (T,)
    attention, softmax : ndarray, shape (T, N, N), or None
        ``A`` and ``A*`` at each frame (None: the model has no attention map).
    features : ndarray, shape (T, N, d)
    diagnostics : list of dict
        Each frame's diagnostics (``dynamics.Frame.diagnostics``).
    index : ndarray of int, shape (T,)
        Each frame's index among the frames it was thinned from.
    tokens : tuple of str
        The words of a real head (empty: numbered tokens).
    changes : tuple of dynamics.Change
        Mid-run setting changes (a quench), marked on the time plots.
    message : str
        The run's status message ("" when it ran to its end).
    """

    settings: dict
    times: np.ndarray
    attention: np.ndarray | None
    softmax: np.ndarray | None
    features: np.ndarray
    diagnostics: list
    index: np.ndarray
    tokens: tuple = ()
    changes: tuple = field(default_factory=tuple)
    message: str = ""

    @classmethod
    def from_frames(cls, settings, frames, changes=(), message: str = "",
                    max_frames: int = MAX_FRAMES) -> PageRun:
        """The page of ``frames`` (a run's :class:`dynamics.Frame` s, in time order, with
        their arrays), thinned to ``max_frames``.

        Raises
        ------
        ValueError
            No frames.
        """
        frames = list(frames)
        if not frames:
            raise ValueError("no frames: the run has not started")
        keep = spread(len(frames), max_frames)
        frames = [frames[i] for i in keep]
        values = settings.values() if hasattr(settings, "values") and not isinstance(
            settings, dict) else dict(settings)

        def maps(name):
            arrays = [getattr(f, name) for f in frames]
            return None if any(a is None for a in arrays) else np.stack(arrays)

        attention, softmax = maps("attention"), maps("softmax")
        if attention is None and softmax is not None:  # attention slaved to its softmax
            attention = softmax
        if softmax is None:
            attention = None
        return cls(settings=values, times=np.array([f.t for f in frames], dtype=float),
                   attention=attention, softmax=softmax,
                   features=np.stack([f.features for f in frames]),
                   diagnostics=[dict(f.diagnostics) for f in frames], index=keep,
                   tokens=tuple(frames[0].tokens), changes=tuple(changes), message=message)

    @property
    def n_tokens(self) -> int:
        return int(self.features.shape[1])


def color_limits(A: np.ndarray, S: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Each frame's colour limits, as the dashboard sets them frame after frame: of A and
    A* the automatic scale (:func:`app.mainview.heatmaps.scale_limits`, moved in steps),
    of the lag map symmetric limits, a power of 2 above 1.25 times its largest entry.

    Returns
    -------
    ndarray, shape (T, 3)
        ``low``, ``high`` of A and A*, and ``high`` of the lag map (``low = −high``).
    """
    limits, low, high = [], 0.0, 1.0
    for a, s, r in zip(A, S, R, strict=True):
        lo, hi = float(min(a.min(), s.min())), float(max(a.max(), s.max()))
        low, high = scale_limits(SCALES[1], low, high, lo, hi) or (low, high)
        top = 2.0 ** math.ceil(math.log2(1.25 * max(float(np.abs(r).max()), 1e-3)))
        limits.append((low, high, top))
    return np.array(limits, dtype=float)


def _heatmaps(run: PageRun):
    """The dashboard's three maps at the run's first frame, and the per-frame images
    (float32) and colour limits (:func:`color_limits`)."""
    heat = Heatmaps(run.n_tokens)
    heat.set_model(run.settings["model"])
    A = run.attention.astype(np.float32)
    S = run.softmax.astype(np.float32)
    R = log_ratio(run.attention, run.softmax).astype(np.float32)
    limits = color_limits(A, S, R)
    low, high, top = limits[0]
    for mapper in (heat.mappers["lin"], heat.bar_mappers["lin"]):
        mapper.update(low=low, high=high)
    for mapper in (heat.ratio_mapper, heat.ratio_bar_mapper):
        mapper.update(low=-top, high=top)
    for source, name, images in zip(heat.sources, MAP_NAMES, (A, S, R), strict=True):
        source.name = name
        source.data = {"image": [images[0]], **({"frame": [0]} if name == MAP_NAMES[0]
                                                 else {})}
    label_axes(heat.figures, run.tokens, run.n_tokens)
    return heat, (A, S, R), limits


def same_maps(run: PageRun) -> bool:
    """The run's attention is its softmax at every frame (its model's lag is ≡ 0): the
    page then stores one map per frame and the first lag map (rounding, as on the page)."""
    return run.softmax is not None and (run.attention is run.softmax or "kl" in spec(
        run.settings["model"]).identically_zero)


def _tokens(run: PageRun, heat):
    """The dashboard's token plot: every token's whole path, faint, and the tokens at the
    first frame; the projected positions of every frame (float32)."""
    tr = Trajectories()
    mean, axes = principal_axes(run.features[0])
    xy = ((run.features - mean) @ axes.T).astype(np.float32)  # (T, N, 2)
    n = run.n_tokens
    tr.colors.high = max(n - 1, 1)
    finite = xy[np.all(np.isfinite(xy), axis=(1, 2))]
    for rng, values in ((tr.fig.x_range, finite[..., 0]), (tr.fig.y_range, finite[..., 1])):
        lo, hi = float(values.min()), float(values.max())
        pad = 0.08 * max(hi - lo, 1e-6) + 1e-3
        rng.update(start=lo - pad, end=hi + pad)
    paths = ColumnDataSource({"xs": [xy[:, i, 0] for i in range(n)],
                              "ys": [xy[:, i, 1] for i in range(n)],
                              "token": np.arange(n, dtype=np.int32)})
    tr.fig.multi_line("xs", "ys", source=paths, line_alpha=0.35, line_width=1.5,
                      line_color={"field": "token", "transform": tr.colors})
    data = {"x": xy[0, :, 0], "y": xy[0, :, 1], "token": np.arange(n, dtype=np.int32)}
    if run.tokens:
        data["word"] = list(run.tokens)
    tr.tokens.data = data
    tr.tokens.name = TOKENS_NAME
    if heat is not None:
        heat.link_tokens(tr)
    return tr, xy


def _time_series(run: PageRun, annotations=(), lam: float = math.nan):
    """The dashboard's KL plot (log axis) and energy balance over the whole run, with the
    tour step's ``annotations`` and the run's changes marked."""
    ts = TimeSeries()
    rows = [ts.row(SimpleNamespace(diagnostics=d)) for d in run.diagnostics]
    ts.source.data = {k: [r[k] for r in rows] for k in COLUMNS}
    ts.set_model(run.settings["model"])
    ts.fit_ranges()
    ts.mark_changes(run.changes)
    if annotations:
        level = math.nan  # the noise's predicted lag at the run's first A* (static path)
        if "noise_level" in annotations and run.softmax is not None:
            level = small_noise_kl(run.softmax[0], stationary_variance(
                float(run.settings.get("logit_noise", 0.0)), lam))
        ts.guides.show(tuple(annotations), lam, level)
    return ts, rows


def page_layout(run: PageRun, annotations=(), lam: float = math.nan):
    """The page's plots, slider and Play button as one Bokeh layout (named ``"page"``).

    Parameters
    ----------
    run : PageRun
    annotations : iterable of str
        A tour step's annotations (:data:`app.mainview.guides.ANNOTATIONS`).
    lam : float
        The relaxation rate ``γ/β`` the slope guide uses.
    """
    heat, images, limits = (None, None, None) if run.softmax is None else _heatmaps(run)
    tr, xy = _tokens(run, heat)
    ts, rows = _time_series(run, annotations, lam)
    col = {k: np.array([r[k] for r in rows], dtype=float) for k in
           ("kl_log", "kl", "kl_bound", "d_energy", "residual")}
    frames = {"t": run.times, "x": [xy[k, :, 0] for k in range(len(run.times))],
              "y": [xy[k, :, 1] for k in range(len(run.times))], "kl": col["kl_log"],
              "kl_raw": col["kl"], "bound": col["kl_bound"], "d_energy": col["d_energy"],
              "residual": col["residual"], "index": run.index.astype(np.int32)}
    if images is not None:  # the lag map is computed in the page from A and A*
        frames["A"] = list(images[0])
        if not same_maps(run):  # (A ≡ A*: one map, and the first lag map throughout)
            frames["S"] = list(images[1])
        frames.update({"low": limits[:, 0], "high": limits[:, 1], "top": limits[:, 2]})
    frames_source = ColumnDataSource(frames, name=FRAMES_NAME)
    lag = ColumnDataSource({"t": [float(run.times[0])], "kl": [float(col["kl_log"][0])]},
                           name=LAG_NAME)
    ts.fig_kl_log.scatter("t", "kl", source=lag, size=12, fill_color=HIGHLIGHT,
                          line_color="black", level="overlay")
    spans = []
    for fig in (ts.fig_kl_log, ts.fig_energy):
        span = Span(location=float(run.times[0]), dimension="height", line_color="#333",
                    line_dash="dotted", line_width=2, name=TIME_NAME)
        fig.add_layout(span)
        spans.append(span)
    lag.tags = [0]
    lag.js_on_change("tags", CustomJS(args={
        "frames": frames_source, "maps": list(heat.sources) if heat is not None else [],
        "mappers": ([heat.mappers["lin"], heat.bar_mappers["lin"]] if heat is not None
                    else []),
        "ratio_mappers": ([heat.ratio_mapper, heat.ratio_bar_mapper] if heat is not None
                          else []),
        "dots": tr.tokens, "spans": spans, "lag": lag, "readout": READOUT_ID},
        code=SHOW_FRAME))
    tr.fig.width = TOKENS_WIDTH
    top = row(*(heat.figures if heat is not None else ()))
    bottom = row(ts.fig_kl_log, ts.fig_energy, tr.fig)
    return column(top, bottom, name="page")


def _readout(run: PageRun) -> str:
    """The readout's first line (the page's script writes it for every other frame)."""
    d = run.diagnostics[0]
    e0 = d.get("hamiltonian", math.nan)

    def f(v):
        return f"{v:.4g}" if math.isfinite(v) else "n/a"
    return (f"t = {run.times[0]:.3f} · frame 1 of {len(run.times)} · Σ KL = "
            f"{f(d.get('kl', math.nan))} · bound = {f(d.get('kl_bound', math.nan))} · "
            f"energy change = {f(e0 - e0)} · residual = "
            f"{f(d.get('energy_residual', math.nan))}")
