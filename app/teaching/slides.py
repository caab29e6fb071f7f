"""Figures for slides: the current view of a run as one 16:9 figure (PNG, SVG, PDF).

A slide is drawn on the server with Matplotlib from the run's recorded frames and its
settings, not captured from the page: it needs no browser, is the same for every
viewer, and its curves are the run's numbers (tested). It shows

* a title (the model and the time reached) and the caption of the preset or tour step;
* the attention ``A(t)`` and its softmax ``A*(t)`` at the last frame, on one colour
  scale (Theory page: scores and softmax);
* the tokens' paths on the principal axes of ``X(0)``;
* the attention lag ``Σᵢ KL(Aᵢ‖A*ᵢ)`` with its tracking bound (log or linear axis, as on
  the page; Theory page: tracking the moving softmax), the energy balance and the
  dissipation rate, with a dashed line at each mid-run change of a setting;
* pinned runs (:mod:`app.teaching.pinned`) as grey ghosts, the legends naming the settings in
  which they differ from this run;
* at the bottom, the run's settings line.

Sizes: :data:`SLIDE_INCHES` (13.333 × 7.5 in, PowerPoint's and Beamer-at-16:9's
page) at :data:`DPI` = 144: a 1920 × 1080 px PNG; the SVG and PDF are 960 × 540 pt.

:func:`tour_figures` runs a list of steps headless (settings and ``t_end`` each) and
writes one slide per step: a tour exports all its steps at once.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.mainview.ranges import LOG_FLOOR
from app.mainview.timeseries import ENERGY_TITLE, coalesce, merge_gap
from app.mainview.trajectories import principal_axes
from app.models import ZERO_NOTE, energy_symbol, not_applicable, spec
from app.presets import quench_changes
from app.presets import validate as validate_preset
from dynamics import RUNNING, Settings, Simulation
from dynamics.inertial.experiments import lab_settings, run_lab_experiment
from dynamics.inertial.momentum import MOMENTUM_MODEL, run_momentum_experiment

from .run_record import RunRecord, comparison_labels, safe_filename

if TYPE_CHECKING:  # Matplotlib is imported when a slide is drawn, not with the page
    from matplotlib.figure import Figure

#: Pixels of a PNG slide, and its resolution.
PIXELS = (1920, 1080)
DPI = 144
#: Size of a slide (inches): 16:9.
SLIDE_INCHES = (PIXELS[0] / DPI, PIXELS[1] / DPI)
#: Formats a slide is written in, and their media types.
FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
#: Frames a headless run records for its slide (evenly spread over the run).
TOUR_FRAMES = 500
#: Colours: this run, its tracking bound, and the pinned runs' ghosts.
RUN_COLOR, BOUND_COLOR, GHOST_COLOR = "#1f77b4", "#d62728", "#7f7f7f"
#: Line styles of the pinned runs' ghosts (one each, as on the page).
GHOST_STYLES = ("-", "-.", ":")
#: Colour scales of A and A* (those of the page's heatmaps).
SCALES = ("fixed 0–1", "automatic", "logarithmic")
_ENERGY_LINES = (  # key, label, colour, style; the label's {E} is the model's energy
    ("d_energy", "{E}(t) − {E}(0)", "#1f77b4", "-"),
    ("budget", "work − dissipated", "#ff7f0e", "--"),
    ("dissipated", "dissipated ∫D dt", "#9467bd", "-"),
    ("residual", "residual", "#d62728", "-"),
)


def plain_caption(markdown: str) -> str:
    """The text of a caption written in Markdown: no ``**``, ``*`` or link syntax."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown or "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("**", "").replace("`", "")
    # *emphasis* (a star after a letter, as in A*, stays)
    text = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)\*(?![\w*])", r"\1", text)
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


class SlideRun:
    """The data of one slide: the run's record and its last attention maps.

    Parameters
    ----------
    record : app.teaching.pinned.RunRecord
        Settings, curves and token paths of the run.
    attention, softmax : ndarray, shape (N, N), or None
        ``A`` and ``A*`` at the last frame (None for a model without attention).
    changes : sequence of dynamics.Change
        The run's mid-run setting changes (marked on the time plots).
    distance : (ndarray, ndarray) or None
        Times and distance ``‖X − X_reduced‖`` to the reduced model's run beside (the
        page's comparison mode), drawn in a fourth time plot; None: no such plot.
    """

    def __init__(self, record: RunRecord, attention=None, softmax=None, changes=(),
                 distance=None, maps_time=None, attention_end=None):
        self.record, self.attention, self.softmax = record, attention, softmax
        self.changes = tuple(changes)
        self.distance = None if distance is None else tuple(
            np.asarray(v, dtype=float) for v in distance)
        #: time of the maps (default: the last frame's)
        self.maps_time = float(record.times[-1] if maps_time is None else maps_time)
        #: ``A`` at the last frame, drawn beside ``A`` at :attr:`maps_time` in place of
        #: ``A*`` (a model whose attention is its softmax; None otherwise)
        self.attention_end = attention_end

    @classmethod
    def from_frames(cls, settings, frames, changes=(), max_frames=None,
                    informative: bool = False) -> SlideRun:
        """The slide data of a run's recorded ``frames`` (all kept by default).

        The maps are the last frame's, or with ``informative`` those of
        :func:`informative_frame` (a tour's slide: the relaxation, not its end)."""
        frames = list(frames)
        record = RunRecord.from_frames(settings, frames, max_frames=max_frames)
        model = settings["model"] if isinstance(settings, Mapping) else settings.model
        at = frames[informative_frame(frames, model) if informative else -1]
        run = cls(record, at.attention, at.softmax, changes, maps_time=at.t)
        if informative and _attention_is_softmax(model) and at is not frames[-1]:
            run.attention_end = frames[-1].attention
        return run


#: A decaying lag is shown where it has fallen to this fraction of its start: A and A*
#: still differ visibly, and the start is forgotten.
RELAXED_FRACTION = 0.25


def _attention_is_softmax(model: str) -> bool:
    """The model's attention is its softmax at every time (its lag ≡ 0)."""
    return "kl" in spec(model).identically_zero or "kl" in not_applicable(model)


def informative_frame(frames, model: str) -> int:
    """Index of the frame whose maps show what a run does (a tour's slide).

    * A model whose attention is its softmax (``A = A*``): the first frame (its maps are
      drawn beside the last frame's: how the attention changed).
    * A lag that decays from its start (relaxation): the first frame where it has fallen
      to :data:`RELAXED_FRACTION` of its start, so ``A`` and ``A*`` still differ.
    * Otherwise (a lag that builds up: a moving target, noise): the frame of the largest
      lag.
    """
    frames = list(frames)
    if len(frames) < 2:
        return len(frames) - 1
    if _attention_is_softmax(model):
        return 0
    kl = np.array([f.diagnostics.get("kl", math.nan) for f in frames], dtype=float)
    if not np.all(np.isfinite(kl)):
        return len(frames) - 1
    peak = int(np.argmax(kl))
    if peak == 0 and kl[0] > 0:
        below = np.flatnonzero(kl <= RELAXED_FRACTION * kl[0])
        return int(below[0]) if below.size else len(frames) - 1
    return peak


def _curve(record: RunRecord, key: str) -> np.ndarray:
    c = record.curves
    return {"d_energy": record.energy_change(), "budget": c["work"] - c["dissipated"],
            "dissipated": c["dissipated"], "residual": c["energy_residual"]}[key]


def slide_figure(run: SlideRun, caption: str = "", pinned: Iterable[RunRecord] = (),
                 log_kl: bool = True, color_scale: str = "automatic",
                 annotations: Iterable[str] = ()) -> Figure:
    """The slide of ``run`` as a Matplotlib figure (not attached to pyplot).

    Parameters
    ----------
    run : SlideRun
    caption : str
        Markdown; shown as plain text under the title.
    pinned : iterable of app.teaching.pinned.RunRecord
        Runs drawn as grey ghosts on the KL, energy and token plots.
    log_kl : bool
        The KL lag on a logarithmic axis (values floored at ``LOG_FLOOR``).
    color_scale : str
        One of :data:`SCALES`, as the page's heatmaps.
    annotations : iterable of str
        A tour step's annotations (:data:`app.mainview.guides.ANNOTATIONS`), drawn as the page
        draws them: ``"kl_slope"`` the dashed guide of slope ``−2λ`` on the log KL plot,
        ``"tracking_bound"`` the bound thick where it is tight, ``"conserved_energy"``
        the line ``H(t) = H(0)``.

    Returns
    -------
    matplotlib.figure.Figure
        Its axes are ``fig.slide_axes``: a dict with keys ``"A"``, ``"A*"`` (or, for a
        model whose attention is its softmax, ``"A end"``: the last frame's), ``"tokens"``
        and the time plots: ``"kl"``, ``"energy"``, ``"rate"`` for the models that have
        them (a plot whose curves are all ≡ 0 is left out and said in a note), the
        sphere's ``"interaction"`` and ``"clusters"`` in place of the energy balance and
        the rate, and with ``run.distance`` ``"distance"`` (a model without attention
        has no maps).
    """
    from matplotlib.figure import Figure

    from app.mainview.clustering import clustering_mode
    from app.mainview.guides import ANNOTATIONS

    if color_scale not in SCALES:
        raise ValueError(f"color_scale must be one of {', '.join(SCALES)}, got {color_scale!r}")
    annotations = tuple(annotations)
    unknown = [a for a in annotations if a not in ANNOTATIONS]
    if unknown:
        raise ValueError(f"unknown annotation(s) {unknown}; known: {', '.join(ANNOTATIONS)}")
    rec = run.record
    pinned = list(pinned)
    s = spec(rec.model)
    fig = Figure(figsize=SLIDE_INCHES, dpi=DPI, layout="constrained")
    fig.get_layout_engine().set(h_pad=0.06, w_pad=0.06, hspace=0.06, wspace=0.04)
    title = f"{s.title}  (t = {rec.times[-1]:.3g})"
    text = plain_caption(caption)
    fig.suptitle(title if not text else f"{title}\n{_wrap(text, 120)}", fontsize=15,
                 fontweight="bold" if not text else "normal")
    grid = fig.add_gridspec(2, 3)
    axes = {}
    if run.attention is not None and run.softmax is not None:
        axes["A"] = fig.add_subplot(grid[0, 0])
        second = "A end" if run.attention_end is not None else "A*"
        axes[second] = fig.add_subplot(grid[0, 1])
        _heatmaps(fig, axes["A"], axes[second], run, color_scale)
        axes["tokens"] = fig.add_subplot(grid[0, 2])
    else:
        axes["tokens"] = fig.add_subplot(grid[0, :])
    _tokens(axes["tokens"], rec, pinned)
    if run.attention_end is None and run.maps_time < rec.times[-1] and "A" in axes:
        axes["tokens"].set_title(axes["tokens"].get_title() + f" (to t = {rec.times[-1]:.3g})",
                                 fontsize=11)
    sphere = clustering_mode(rec.model) == "on_sphere"
    missing = set(not_applicable(rec.model)) | set(s.identically_zero)
    kinds = []
    if not {"kl", "kl_bound"} <= missing:
        kinds.append("kl")
    kinds += ["interaction", "clusters"] if sphere else ["energy"]
    if not sphere and "dissipation_rate" not in missing:
        kinds.append("rate")
    if run.distance is not None:
        kinds.append("distance")
    bottom = grid[1, :].subgridspec(1, max(2, len(kinds)))
    for i, key in enumerate(kinds):
        axes[key] = fig.add_subplot(bottom[0, i])
    labels = [comparison_labels(p.settings, rec.settings) for p in pinned]
    if "kl" in axes:
        _kl(axes["kl"], rec, pinned, labels, log_kl)
        _kl_annotations(axes["kl"], rec, annotations, log_kl)
    if "energy" in axes:
        _energy(axes["energy"], rec, pinned, labels)
        if "conserved_energy" in annotations:
            _conserved(axes["energy"], rec.model)
    if "rate" in axes:
        _rate(axes["rate"], rec)
    if sphere:
        _interaction(axes["interaction"], rec)
        _clusters(axes["clusters"], rec)
    if "distance" in axes:
        _distance(axes["distance"], *run.distance)
    if len(kinds) > 3:  # four plots in a row: titles that fit their width
        for key, short in (("energy", "Energy balance"), ("rate", "Dissipation rate D(t)")):
            if key in axes:
                axes[key].set_title(short, fontsize=12)
    left_out = [f"{_DROPPED[k]}: {_note(rec.model, diagnostic)}"
                for k, diagnostic in (("kl", "kl"), ("rate", "dissipation_rate"))
                if k not in kinds and _note(rec.model, diagnostic)]
    line = _wrap(rec.line, 190)
    if left_out:
        line = f"Not drawn: {'; '.join(left_out)}\n{line}"
    fig.supxlabel(line, fontsize=10, color="#333")
    marks = coalesce(run.changes, merge_gap(rec.times))
    for key in ("kl", "energy", "rate", "interaction", "clusters"):
        if key not in axes:
            continue
        ax = axes[key]
        for t0, t1, label in marks:
            ax.axvline(t0, color="#666", ls="--", lw=1)
            if t1 > t0:
                ax.axvspan(t0, t1, color="#888", alpha=0.15, lw=0)
            ax.annotate(label, (t0, 0.02), xycoords=("data", "axes fraction"),
                        ha="right", fontsize=9, color="#444", xytext=(-3, 0),
                        textcoords="offset points")
    if "A" in axes and run.attention_end is None and run.maps_time < rec.times[-1]:
        for key in ("kl", "energy", "rate"):  # where the maps are taken
            if key in axes:
                axes[key].axvline(run.maps_time, color="#2ca02c", ls=":", lw=1.5)
        if "kl" in axes:
            axes["kl"].annotate(f"maps at t = {run.maps_time:.3g}", (run.maps_time, 0.97),
                                xycoords=("data", "axes fraction"), va="top", fontsize=9,
                                color="#2ca02c", xytext=(3, 0), textcoords="offset points")
    fig.slide_axes = axes
    return fig


#: What a left-out time plot showed (said under the slide).
_DROPPED = {"kl": "the lag Σᵢ KL(Aᵢ‖A*ᵢ)", "rate": "the dissipation rate D(t)"}


def _kl_annotations(ax, rec: RunRecord, annotations, log_kl: bool) -> None:
    """A tour step's guides on the KL plot, as :class:`app.mainview.guides.Guides` draws them."""
    from app.mainview.guides import GUIDE_COLOR, GUIDE_LENGTH, T_ANCHOR, TIGHT, TIGHT_COLOR

    t, kl, bound = rec.times, rec.curves["kl"], rec.curves["kl_bound"]
    if "kl_slope" in annotations and log_kl:
        lam = float(rec.settings["gamma"]) / float(rec.settings["beta"])
        at = np.flatnonzero((t >= T_ANCHOR) & (kl > 0) & np.isfinite(kl))
        if at.size and math.isfinite(lam):
            t0, kl0 = float(t[at[0]]), float(kl[at[0]])
            ts = np.array([max(0.0, t0 - GUIDE_LENGTH), min(t0 + GUIDE_LENGTH, float(t[-1]))])
            slope = f"{-2 * lam:.3g}".replace("-", "−")
            ax.plot(ts, np.maximum(kl0 * np.exp(-2 * lam * (ts - t0)), LOG_FLOOR),
                    color=GUIDE_COLOR, ls="--", lw=2, label=f"guide: slope −2λ = {slope}",
                    gid="kl_slope")
            ax.legend(fontsize=9, loc="best")
    if "tracking_bound" in annotations:
        tight = (kl >= TIGHT * bound) & (bound > 0)
        if np.any(tight):
            ax.scatter(t[tight], np.maximum(bound[tight], LOG_FLOOR) if log_kl else bound[tight],
                       s=14, color=TIGHT_COLOR, alpha=0.6, zorder=3,
                       label="bound tight (lag ≥ bound/10)")
            ax.legend(fontsize=9, loc="best")


def _conserved(ax, model: str) -> None:
    from app.mainview.guides import GUIDE_COLOR

    E = energy_symbol(model)
    ax.axhline(0.0, color=GUIDE_COLOR, ls="--", lw=2)
    ax.annotate(f"conserved: {E}(t) = {E}(0)", (0.02, 0.0), xycoords=("axes fraction", "data"),
                xytext=(0, 4), textcoords="offset points", fontsize=10, color=GUIDE_COLOR)


def _interaction(ax, rec: RunRecord) -> None:
    """The sphere's interaction energy ``E_β(t)`` and its maximum ``N² e^β/(2β)``."""
    from dynamics import clustering as cl

    n, beta = rec.features.shape[1], float(rec.settings["beta"])
    E = energy_symbol(rec.model)
    ax.plot(rec.times, _finite(rec.curves["hamiltonian"]), color=RUN_COLOR, lw=2,
            label=f"{E}(t)")
    ax.axhline(cl.max_interaction_energy(n, beta), color=BOUND_COLOR, ls="--", lw=1.5,
               label="maximum N²eᵝ/(2β) (one cluster)")
    ax.set_title(f"Interaction energy {E}(t) and its maximum", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel(E)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4))
    ax.legend(fontsize=9, loc="lower right")


def _clusters(ax, rec: RunRecord) -> None:
    """The count of clusters (groups with ``⟨x_i, x_j⟩ > 1 − ε``) over time."""
    from dynamics.clustering import cluster_labels

    eps = float(rec.settings.get("cluster_eps", 0.01))
    counts = [cluster_labels(X, eps)[0] for X in rec.features]
    ax.step(rec.times, counts, where="post", color=RUN_COLOR, lw=2)
    ax.set_title(f"Clusters: groups with ⟨xᵢ, xⱼ⟩ > 1 − ε (ε = {eps:g})", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("clusters")
    ax.set_ylim(0, max(counts) + 1)


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _heatmaps(fig, ax_a, ax_s, run: SlideRun, scale) -> None:
    """``A`` beside ``A*`` at the maps' time (or, for a model whose attention is its
    softmax, beside ``A`` at the end), on one colour scale; the titles say when."""
    from matplotlib.colors import LogNorm, Normalize

    A = run.attention
    S = run.softmax if run.attention_end is None else run.attention_end
    hi = float(max(np.max(A), np.max(S)))
    if scale == SCALES[0]:
        norm = Normalize(0.0, 1.0)
    elif scale == SCALES[1]:
        norm = Normalize(0.0, min(1.0, 2.0 ** math.ceil(math.log2(max(hi, 1e-12)))))
    else:
        lo = max(float(min(np.min(A), np.min(S))), LOG_FLOOR)
        lo = 10.0 ** math.floor(math.log10(lo))
        norm = LogNorm(lo, max(10.0 ** math.ceil(math.log10(max(hi, lo))), 10 * lo))
    t = f"{run.maps_time:.3g}"
    if run.attention_end is None:
        names = (f"Attention A(t) at t = {t}", f"Softmax A*(t) = rowsoftmax(βS) at t = {t}")
    else:
        names = (f"Attention A = A* at t = {t}",
                 f"Attention A = A* at t = {run.record.times[-1]:.3g}")
    for ax, M, name in ((ax_a, A, names[0]), (ax_s, S, names[1])):
        image = ax.imshow(np.maximum(M, LOG_FLOOR) if scale == SCALES[2] else M,
                          cmap="viridis", norm=norm, interpolation="nearest")
        ax.set_title(name, fontsize=12)
        ax.set_xlabel("source j")
        ax.set_ylabel("query i")
    fig.colorbar(image, ax=[ax_a, ax_s], shrink=0.9, pad=0.01)


def _project(rec: RunRecord, mean, axes_) -> np.ndarray:
    return (rec.features - mean) @ axes_.T  # (T, N, 2)


def _tokens(ax, rec: RunRecord, pinned) -> None:
    from matplotlib.collections import LineCollection

    mean, pcs = principal_axes(rec.features[0])
    keep = np.unique(np.round(np.linspace(0, len(rec.times) - 1,
                                          min(len(rec.times), 300))).astype(int))
    xy = _project(rec, mean, pcs)[keep]  # (T', N, 2)
    n = xy.shape[1]
    for p in pinned:
        same = p.features.shape[1:] == rec.features.shape[1:]
        m, a = (mean, pcs) if same else principal_axes(p.features[0])
        ghost = _project(p, m, a)
        ax.add_collection(LineCollection(np.swapaxes(ghost, 0, 1), colors=GHOST_COLOR,
                                         alpha=0.45, linewidths=1.0, linestyles="--"))
        ax.scatter(ghost[-1, :, 0], ghost[-1, :, 1], s=30, facecolors="none",
                   edgecolors=GHOST_COLOR, alpha=0.7, zorder=2)
    colors = _token_colors(n)
    ax.add_collection(LineCollection(np.swapaxes(xy, 0, 1), colors=colors, alpha=0.6,
                                     linewidths=1.2))
    ax.scatter(xy[-1, :, 0], xy[-1, :, 1], s=36, c=colors, edgecolors="black", zorder=3)
    ax.autoscale_view()
    ax.set_title("Token paths on the axes of X(0) (grey: pinned)" if pinned
                 else "Token paths on the principal axes of X(0)", fontsize=11)
    ax.set_xlabel("PC 1 of X(0)")
    ax.set_ylabel("PC 2 of X(0)")


def _token_colors(n: int):
    from matplotlib import colormaps

    return colormaps["turbo"](np.linspace(0.1, 0.9, n))


def _kl(ax, rec: RunRecord, pinned, labels, log_kl: bool) -> None:
    def shown(v):
        return np.maximum(v, LOG_FLOOR) if log_kl else v

    now = labels[0][1] if labels else None
    notes = []
    for key, label, color, style in (
            ("kl", "Σᵢ KL(Aᵢ‖A*ᵢ)" + (f" — {now}" if now else ""), RUN_COLOR, "-"),
            ("kl_bound", "tracking bound Σ Bᵢ²/8", BOUND_COLOR, "--")):
        note = _note(rec.model, key)
        if note:  # not drawn: said in the plot
            notes.append(f"{label.split(' — ')[0]}: {note}")
            continue
        ax.plot(rec.times, shown(rec.curves[key]), color=color, lw=2, ls=style, label=label)
    if notes:
        ax.text(0.02, 0.04, "\n".join(notes), transform=ax.transAxes, fontsize=10,
                color="#555")
    for p, (ghost, _), ls in zip(pinned, labels, cycle(GHOST_STYLES), strict=False):
        ax.plot(p.times, shown(p.curves["kl"]), color=GHOST_COLOR, lw=2, alpha=0.5, ls=ls,
                label=f"pinned — {ghost}")
        ax.plot(p.times, shown(p.curves["kl_bound"]), color=GHOST_COLOR, lw=1.2, ls="--",
                alpha=0.4)
    if log_kl:
        ax.set_yscale("log")
    ax.set_title("Attention lag Σᵢ KL(Aᵢ‖A*ᵢ)", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("KL (nats)")
    if ax.get_lines():
        ax.legend(fontsize=9, loc="best")


def _energy(ax, rec: RunRecord, pinned, labels) -> None:
    E = energy_symbol(rec.model)
    missing = set(not_applicable(rec.model)) | set(spec(rec.model).identically_zero)
    now = labels[0][1] if labels else None
    for key, label, color, style in _ENERGY_LINES:
        if key == "residual" and "energy_residual" in missing \
                or key == "dissipated" and "dissipated" in missing:
            continue
        text = label.format(E=E) + (f" — {now}" if now and key == "d_energy" else "")
        ax.plot(rec.times, _finite(_curve(rec, key)), color=color, ls=style, lw=2, label=text)
    for p, (ghost, _), ls in zip(pinned, labels, cycle(GHOST_STYLES), strict=False):
        ax.plot(p.times, _finite(p.energy_change()), color=GHOST_COLOR, lw=2, alpha=0.5, ls=ls,
                label=f"pinned {energy_symbol(p.model)}(t) − {energy_symbol(p.model)}(0)"
                      f" — {ghost}")
    ax.set_title(ENERGY_TITLE, fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("energy (score units)")
    ax.legend(fontsize=9, loc="best")


def _rate(ax, rec: RunRecord) -> None:
    note = _note(rec.model, "dissipation_rate")
    if note:
        ax.text(0.5, 0.5, f"D(t): {note}", ha="center", transform=ax.transAxes,
                fontsize=12, color="#555")
    else:
        ax.plot(rec.times, _finite(rec.curves["dissipation_rate"]), color="#9467bd", lw=2,
                label="D(t)")
        ax.legend(fontsize=9, loc="best")
    ax.set_title("Dissipation rate D(t) = γ Σᵢ Var_Aᵢ(Cᵢ)", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("D (score units / time)")


def _note(model: str, diagnostic: str) -> str:
    """Why ``diagnostic`` is not drawn for ``model`` (as the page says), or ``""``."""
    if diagnostic in not_applicable(model):
        return "n/a for this model"
    if diagnostic in spec(model).identically_zero:
        return ZERO_NOTE
    return ""


def _distance(ax, t: np.ndarray, distance: np.ndarray) -> None:
    ax.plot(t, distance, color="#8c564b", lw=2, label="‖X − X_reduced‖ (Frobenius)")
    ax.set_title("Distance to the reduced model", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("‖X − X_reduced‖")
    ax.legend(fontsize=9, loc="best")


def _finite(v: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(v), v, np.nan)


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """``fig`` written as ``fmt`` (one of :data:`FORMATS`) at the slide's size.

    The SVG and PDF carry no creation date (the same run gives the same file).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else None
    fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
    return buf.getvalue()


# -- the dashboard's view ------------------------------------------------------
def dashboard_slide(dashboard) -> Figure:
    """The slide of the dashboard's current view: its recorded frames, caption, KL axis,
    colour scale, pinned runs and, in comparison mode, the distance to the reduced model."""
    if not dashboard.history:
        raise ValueError("no frames recorded yet: nothing to draw")
    run = SlideRun.from_frames(dashboard.settings, dashboard.history, dashboard.sim.changes)
    if dashboard.compare:  # the distance plot is shown: its rows (the page's last ROLLOVER)
        ts = dashboard.timeseries  # rows on the page, then those not yet sent
        run.distance = tuple(
            np.concatenate([np.asarray(ts.source.data[k], dtype=float),
                            np.array([row[k] for row in ts.pending], dtype=float)])
            for k in ("distance_t", "distance"))
    pinned = getattr(dashboard, "pinned", None)
    return slide_figure(run, caption=dashboard.caption.object,
                        pinned=pinned.runs if pinned is not None else (),
                        log_kl=dashboard.timeseries.log_kl,
                        color_scale=dashboard.heatmaps.color_scale)


def slide_bytes(dashboard, fmt: str) -> io.BytesIO:
    """The dashboard's slide (:func:`dashboard_slide`) as a file of format ``fmt``."""
    return io.BytesIO(figure_bytes(dashboard_slide(dashboard), fmt))


def download_buttons(dashboard):
    """FileDownload buttons "Slide PNG", "Slide SVG", "Slide PDF" (16:9), named after
    the model and the time of the run like the data downloads (:mod:`app.mainview.export`)."""
    import panel as pn

    from app.mainview.export import filename

    buttons = []
    for fmt in FORMATS:
        button = pn.widgets.FileDownload(filename=f"slide_{filename(dashboard, fmt)}",
                                         label=f"Slide {fmt.upper()}", color="default",
                                         width=86, margin=(5, 3))

        def callback(button=button, fmt=fmt):
            button.filename = f"slide_{filename(dashboard, fmt)}"
            return slide_bytes(dashboard, fmt)

        button.callback = callback
        buttons.append(button)
    return pn.Row(*buttons)


# -- the inertial lab's slide -----------------------------------------------------
def lab_slide_figure(result, title: str = "Inertial lab", caption: str = "") -> Figure:
    """One 16:9 slide of the inertial lab's six plots for ``result`` (a
    :class:`dynamics.inertial.experiments.LabResult`): eigenvalues of ``S(t)`` with
    ``T_max`` and the accelerated blow-up, the token cloud, the layers with ``θ`` and
    the first crossing, the three clouds, the Hamiltonian and the softmax flows.

    Returns
    -------
    matplotlib.figure.Figure
        Its axes are ``fig.slide_axes``: keys ``"eigenvalues"``, ``"cloud"``,
        ``"layers"``, ``"clouds"``, ``"hamiltonian"``, ``"softmax"``.
    """
    from matplotlib.figure import Figure  # loaded only to draw a slide

    fig = Figure(figsize=SLIDE_INCHES, dpi=DPI, layout="constrained")
    text = plain_caption(caption)
    fig.suptitle(title if not text else f"{title}\n{_wrap(text, 120)}", fontsize=15)
    from app.lab.inertial_lab import CONTROLS  # the settings the lab shows

    shown = ("model", "kernel_diag", "value_diag", *CONTROLS)
    fig.supxlabel(_wrap(" · ".join(f"{k} = {result.settings[k]}" for k in shown
                                   if k in result.settings), 190), fontsize=10, color="#333")
    grid = fig.add_gridspec(2, 3)
    names = ("eigenvalues", "cloud", "layers", "clouds", "hamiltonian", "softmax")
    axes = {k: fig.add_subplot(grid[i // 3, i % 3]) for i, k in enumerate(names)}
    ax = axes["eigenvalues"]
    for curves, color, ls, label in ((result.first_order_eigenvalues, "C0", "-", "first order"),
                                     (result.accelerated_eigenvalues, "C3", ":",
                                      "accelerated")):
        for k, c in enumerate(curves):
            ax.plot(c.x, c.y, color=color, ls=ls, lw=2, label=label if k == 0 else None)
    for t, color, label in ((result.first_order_time, "C0", "T_max"),
                            (result.accelerated_time, "C3", "blow-up")):
        if math.isfinite(t):
            ax.axvline(t, color=color, ls="--", lw=1.5)
            ax.annotate(f"{label} = {t:.3f}", (t, 0.55), xycoords=("data", "axes fraction"),
                        ha="right", fontsize=10, color=color, xytext=(-3, 0),
                        textcoords="offset points")
    ax.set(yscale="log", xlabel="time t", ylabel="eigenvalue of S(t)",
           title="Eigenvalues of S(t)")
    ax = axes["cloud"]
    ax.scatter(*result.data.X0[:, :2].T, color="gray", s=18, label="t = 0")
    ax.scatter(*result.later_cloud[:, :2].T, color="C3", s=18,
               label=f"first order, t = {result.cloud_time:.3g}")
    ax.set(xlabel="x₁", ylabel="x₂", title="Token cloud (first two coordinates)")
    ax = axes["layers"]
    layers = result.layers
    ax.plot(layers["continuous"].x, layers["continuous"].y, color="black", lw=2,
            label="continuous, t/h")
    ax.scatter(layers["euler"].x, layers["euler"].y, color="C0", s=14, label="explicit Euler")
    ax.scatter(layers["kick_damp_drift"].x, layers["kick_damp_drift"].y, color="C3", s=18,
               marker="^", label="kick-damp-drift")
    ax.axhline(result.theta, color="gray", ls=":", lw=1)
    if result.crossing_layer is not None:
        ax.axvline(result.crossing_layer, color="C3", ls="--", lw=1.5)
        predicted = "" if result.predicted_layer is None else \
            f" (⌈T_θ/h⌉ = {result.predicted_layer})"
        ax.annotate(f"crossing {result.crossing_layer}{predicted}", (result.crossing_layer,
                    0.55), xycoords=("data", "axes fraction"), ha="right", fontsize=10,
                    color="C3", xytext=(-3, 0), textcoords="offset points")
    ax.set(yscale="log", xlabel="layer l (depth l·h)", ylabel="λ_max(S_l)",
           title=f"Layers of step h = {result.layer_h:g}, θ = {result.theta:g}")
    ax = axes["clouds"]
    for (name, c), ls in zip(result.cloud_moments.items(), cycle(("-", "--", ":")),
                             strict=False):
        ax.plot(c.x, c.y, ls=ls, lw=2, label=name)
    ax.set(yscale="log", xlabel="time t", ylabel="λ_max(S)",
           title="Three clouds with the same S(0)")
    ax = axes["hamiltonian"]
    ax.plot(result.hamiltonian.x, result.hamiltonian.y, lw=2)
    ax.set(xlabel="time t", ylabel="H(S, P)", title="Hamiltonian H(S, P), accelerated")
    ax = axes["softmax"]
    for name, c in result.softmax.items():
        if len(c.x):
            ax.plot(c.x, c.y, lw=2, label=name.replace("softmax_", ""))
    ax.set(yscale="log", xlabel="time t", ylabel="λ_max(S)",
           title="Softmax attention: three flows")
    for key in ("eigenvalues", "cloud", "layers", "clouds", "softmax"):
        if axes[key].get_legend_handles_labels()[0]:
            axes[key].legend(fontsize=9)
    fig.slide_axes = axes
    return fig


def momentum_slide_figure(result, title: str = "Momentum on a quadratic",
                          caption: str = "") -> Figure:
    """One 16:9 slide of the lab's base case for ``result`` (a
    :class:`dynamics.inertial.momentum.MomentumResult`): ``f − f*`` of every run on
    log–log axes with the ``(r − 1)²|x₀|²/(2t²)`` guide, and the paths of the tracked token.

    Returns
    -------
    matplotlib.figure.Figure
        Its axes are ``fig.slide_axes``: keys ``"gap"`` and ``"path"``.
    """
    from matplotlib.figure import Figure  # loaded only to draw a slide

    from app.lab.inertial_lab import RUN_STYLES

    fig = Figure(figsize=SLIDE_INCHES, dpi=DPI, layout="constrained")
    text = plain_caption(caption)
    fig.suptitle(title if not text else f"{title}\n{_wrap(text, 120)}", fontsize=15)
    shown = ("kernel_diag", "n_tokens", "dim", "seed", "alpha", "nesterov_r", "nesterov_t0")
    fig.supxlabel(_wrap(" · ".join(f"{k} = {result.settings[k]}" for k in shown)
                        + f" · RK4, dt = {result.dt:g}", 190), fontsize=10, color="#333")
    gap, path = fig.subplots(1, 2)
    dashes = {"solid": "-", "dashed": "--", "dashdot": "-."}
    for key, run in result.runs.items():
        color, dash = RUN_STYLES[key]
        curve = run.gap_curve()
        gap.plot(curve.x, curve.y, color=color, ls=dashes[dash], lw=2, label=run.label)
        p = run.path()
        path.plot(p.x, p.y, color=color, ls=dashes[dash], lw=2, label=run.label)
    gap.plot(result.bound.x, result.bound.y, color="black", ls=":", lw=2,
             label="(r−1)²|x₀|²/(2t²)")
    gap.set(xscale="log", yscale="log", xlabel="time t", ylabel="f(x(t)) − f*",
            title="f − f* (log–log)")
    x0 = result.runs["nesterov"].path()
    path.scatter([x0.x[0]], [x0.y[0]], color="black", s=30, zorder=3, label="start (at rest)")
    path.scatter([0.0], [0.0], color="black", marker="+", s=80, zorder=3)
    path.set(xlabel="x₁", ylabel="x₂", aspect="equal",
             title="Path of token 1 (a = " + ", ".join(f"{v:.3g}" for v in result.a) + ")")
    for ax in (gap, path):
        ax.legend(fontsize=9)
    fig.slide_axes = {"gap": gap, "path": path}
    return fig


# -- headless: a tour's slides -------------------------------------------------
#: Greek letters of titles spelled out in file names (β stays in "At large β").
GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "eps", "η": "eta",
         "θ": "theta", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "π": "pi",
         "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "ω": "omega", "Δ": "Delta",
         "Σ": "Sigma", "Ω": "Omega", "−": "-"}


def slide_stem(title: str) -> str:
    """A slide's file name (without its number) from its title: Greek letters spelled
    out, a decimal point kept between digits, other signs made ``_``."""
    text = "".join(f"_{GREEK[c]}_" if c in GREEK and c != "−" else GREEK.get(c, c)
                   for c in title)
    text = re.sub(r"\.(?!\d)|(?<!\d)\.", "_", text)  # a dot only between digits
    return re.sub(r"_+", "_", safe_filename(text)).strip("_-") or "slide"


def run_frames(settings: Settings, t_end: float, max_frames: int = TOUR_FRAMES,
               quench: Mapping | None = None):
    """Run ``settings`` from ``t = 0`` to ``t_end`` headless.

    ``quench``: ``{"at_t": t, setting: value, ...}`` (a preset's quench), applied when
    the run reaches ``t`` (a frame is kept just before it); the run continues from its
    state, as on the page, and the change is in ``sim.changes``.

    Returns
    -------
    frames : list of dynamics.Frame
        At most ``max_frames + 2``, evenly spaced in steps (the first and last kept).
    sim : dynamics.Simulation
        The run (its status, message and changes).
    """
    if not (isinstance(t_end, int | float) and math.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
    sim = Simulation(settings.copy())  # a quench changes the run's own settings only
    n_steps = max(1, int(round(t_end / settings.dt)))
    every = max(1, math.ceil(n_steps / max_frames))
    quench_step = None if quench is None else int(round(quench["at_t"] / settings.dt))
    frames = [sim.frame()]
    done = 0
    while done < n_steps and sim.status == RUNNING:
        chunk = min(every, n_steps - done)
        if quench_step is not None and done + chunk >= quench_step:
            sim.advance(quench_step - done)  # to the quench (possibly 0 steps)
            done = quench_step
            if frames[-1].t != sim.t:
                frames.append(sim.frame())
            sim.settings.param.update(**quench_changes(quench))
            sim.sync()
            quench_step = None
            continue
        sim.advance(chunk)
        done += chunk
        frames.append(sim.frame())
    return frames, sim


def tour_figures(steps: Iterable[Mapping], out_dir, formats=("png", "svg")) -> list[Path]:
    """Run each step headless and write its slide: a tour's slides at once.

    Parameters
    ----------
    steps : iterable of mapping
        Each with ``"settings"`` (a mapping of settings; the others keep their
        defaults) and ``"t_end"`` (> 0); optional ``"title"`` (names the file),
        ``"caption"`` or ``"text"`` (shown under the slide's title), ``"annotations"``
        (a tour step's, :func:`slide_figure`) and ``"quench"`` (a preset's quench,
        :func:`run_frames`; marked on the time plots); a step
        with ``"lab_settings"`` instead (the inertial lab's settings) gets the lab's
        slide (:func:`lab_slide_figure`; the base case's, :func:`momentum_slide_figure`,
        for the momentum_quadratic model).
    out_dir : path
        Created if missing.
    formats : iterable of str
        Among :data:`FORMATS`.

    Returns
    -------
    list of pathlib.Path
        The files written, ``NN_<title>.<format>`` (NN the step's number from 01; the
        title as :func:`slide_stem` spells it). The maps are taken where they show the
        run (:func:`informative_frame`), their time said in their titles.

    Raises
    ------
    ValueError
        A step without valid settings or ``t_end`` (the message names the step), or an
        unknown format; nothing is written for any step then.
    """
    formats = tuple(formats)
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    checked = []
    for i, step in enumerate(steps, 1):
        if not isinstance(step, Mapping):
            raise ValueError(f"tour step {i}: expected a mapping, got {type(step).__name__}")
        try:
            if "lab_settings" in step:  # the lab's slide
                checked.append((i, step, lab_settings(dict(step["lab_settings"])), None))
                continue
            settings = Settings.from_mapping(dict(step.get("settings", {})))
            t_end = step.get("t_end")
            if not (isinstance(t_end, int | float) and not isinstance(t_end, bool)
                    and math.isfinite(t_end) and t_end > 0):
                raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
            quench = step.get("quench")
            if quench is not None:
                problems = validate_preset({"name": "quench", "caption": "", "settings": dict(
                    step.get("settings", {})), "quench": quench})
                if problems:
                    raise ValueError("; ".join(problems))
        except (TypeError, ValueError) as err:
            raise ValueError(f"tour step {i}: {err}") from None
        checked.append((i, step, settings, float(t_end)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, step, settings, t_end in checked:
        caption = str(step.get("caption", step.get("text", "")))
        if t_end is None and settings.model == MOMENTUM_MODEL:  # the lab's base case
            fig = momentum_slide_figure(run_momentum_experiment(settings),
                                        str(step.get("title", "Momentum on a quadratic")),
                                        caption)
        elif t_end is None:
            fig = lab_slide_figure(run_lab_experiment(settings),
                                   str(step.get("title", "Inertial lab")), caption)
        else:
            frames, sim = run_frames(settings, t_end, quench=step.get("quench"))
            run = SlideRun.from_frames(settings, frames, sim.changes, informative=True)
            fig = slide_figure(run, caption=caption,
                               annotations=step.get("annotations", ()))
        stem = f"{i:02d}_{slide_stem(str(step.get('title', settings.model)))}"
        for fmt in formats:
            path = out / f"{stem}.{fmt}"
            path.write_bytes(figure_bytes(fig, fmt))
            written.append(path)
    return written
