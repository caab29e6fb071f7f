"""The slide of a run of the main view: one 16:9 figure (:func:`slide_figure`) of a
run's data (:class:`SlideRun`). It shows

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

The plots are drawn by :mod:`app.teaching.slide_panels`, on the page of
:mod:`app.teaching.slide_page`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from app.mainview.markers import coalesce, merge_gap
from app.models import not_applicable, spec

from .run_record import RunRecord, comparison_labels
from .slide_page import DPI, SLIDE_INCHES, plain_caption, wrap
from .slide_panels import (
    DROPPED,
    SCALES,
    draw_clusters,
    draw_conserved,
    draw_distance,
    draw_energy,
    draw_heatmaps,
    draw_interaction,
    draw_kl,
    draw_kl_guides,
    draw_rate,
    draw_tokens,
    not_drawn_note,
)

if TYPE_CHECKING:  # Matplotlib is imported when a slide is drawn, not with the page
    from matplotlib.figure import Figure


class SlideRun:
    """The data of one slide: the run's record and its last attention maps.

    Parameters
    ----------
    record : app.teaching.run_record.RunRecord
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
        #: the run's words (a real head's sentence): the maps' axes name them; empty:
        #: numbered tokens
        self.tokens: tuple[str, ...] = ()

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
        run.tokens = tuple(getattr(frames[-1], "tokens", ()) or ())
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


def slide_figure(run: SlideRun, caption: str = "", pinned: Iterable[RunRecord] = (),
                 log_kl: bool = True, color_scale: str = "automatic",
                 annotations: Iterable[str] = ()) -> Figure:
    """The slide of ``run`` as a Matplotlib figure (not attached to pyplot).

    Parameters
    ----------
    run : SlideRun
    caption : str
        Markdown; shown as plain text under the title.
    pinned : iterable of app.teaching.run_record.RunRecord
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
    fig.suptitle(title if not text else f"{title}\n{wrap(text, 120)}", fontsize=15,
                 fontweight="bold" if not text else "normal")
    grid = fig.add_gridspec(2, 3)
    axes = {}
    if run.attention is not None and run.softmax is not None:
        axes["A"] = fig.add_subplot(grid[0, 0])
        second = "A end" if run.attention_end is not None else "A*"
        axes[second] = fig.add_subplot(grid[0, 1])
        draw_heatmaps(fig, axes["A"], axes[second], run, color_scale)
        axes["tokens"] = fig.add_subplot(grid[0, 2])
    else:
        axes["tokens"] = fig.add_subplot(grid[0, :])
    draw_tokens(axes["tokens"], rec, pinned)
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
        draw_kl(axes["kl"], rec, pinned, labels, log_kl)
        draw_kl_guides(axes["kl"], rec, annotations, log_kl)
    if "energy" in axes:
        draw_energy(axes["energy"], rec, pinned, labels)
        if "conserved_energy" in annotations:
            draw_conserved(axes["energy"], rec.model)
    if "rate" in axes:
        draw_rate(axes["rate"], rec)
    if sphere:
        draw_interaction(axes["interaction"], rec)
        draw_clusters(axes["clusters"], rec)
    if "distance" in axes:
        draw_distance(axes["distance"], *run.distance)
    if len(kinds) > 3:  # four plots in a row: titles that fit their width
        for key, short in (("energy", "Energy balance"), ("rate", "Dissipation rate D(t)")):
            if key in axes:
                axes[key].set_title(short, fontsize=12)
    left_out = [f"{DROPPED[k]}: {not_drawn_note(rec.model, diagnostic)}"
                for k, diagnostic in (("kl", "kl"), ("rate", "dissipation_rate"))
                if k not in kinds and not_drawn_note(rec.model, diagnostic)]
    line = wrap(rec.line, 190)
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
