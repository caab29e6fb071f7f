"""The plots of a run's slide (:func:`app.teaching.run_slide.slide_figure`), one function
each: the attention maps, the tokens' paths, the attention lag with its guides, the
energy balance, the dissipation rate, the sphere's interaction energy and clusters, and
the distance to the reduced model; pinned runs drawn as grey ghosts.
"""

from __future__ import annotations

import math
from itertools import cycle
from typing import TYPE_CHECKING

import numpy as np

from app.mainview.ranges import LOG_FLOOR
from app.mainview.timeseries import ENERGY_TITLE
from app.mainview.trajectories import principal_axes
from app.models import ZERO_NOTE, energy_symbol, not_applicable, spec

from .run_record import RunRecord

if TYPE_CHECKING:
    from .run_slide import SlideRun

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


def _curve(record: RunRecord, key: str) -> np.ndarray:
    c = record.curves
    return {"d_energy": record.energy_change(), "budget": c["work"] - c["dissipated"],
            "dissipated": c["dissipated"], "residual": c["energy_residual"]}[key]


#: What a left-out time plot showed (said under the slide).
DROPPED = {"kl": "the lag Σᵢ KL(Aᵢ‖A*ᵢ)", "rate": "the dissipation rate D(t)"}


def draw_kl_guides(ax, rec: RunRecord, annotations, log_kl: bool) -> None:
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


def draw_conserved(ax, model: str) -> None:
    """The line ``H(t) = H(0)`` of a model that conserves its energy (a tour's guide)."""
    from app.mainview.guides import GUIDE_COLOR

    E = energy_symbol(model)
    ax.axhline(0.0, color=GUIDE_COLOR, ls="--", lw=2)
    ax.annotate(f"conserved: {E}(t) = {E}(0)", (0.02, 0.0), xycoords=("axes fraction", "data"),
                xytext=(0, 4), textcoords="offset points", fontsize=10, color=GUIDE_COLOR)


def draw_interaction(ax, rec: RunRecord) -> None:
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


def draw_clusters(ax, rec: RunRecord) -> None:
    """The count of clusters (groups with ``⟨x_i, x_j⟩ > 1 − ε``) over time."""
    from dynamics.clustering import cluster_labels

    eps = float(rec.settings.get("cluster_eps", 0.01))
    counts = [cluster_labels(X, eps)[0] for X in rec.features]
    ax.step(rec.times, counts, where="post", color=RUN_COLOR, lw=2)
    ax.set_title(f"Clusters: groups with ⟨xᵢ, xⱼ⟩ > 1 − ε (ε = {eps:g})", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("clusters")
    ax.set_ylim(0, max(counts) + 1)


def draw_heatmaps(fig, ax_a, ax_s, run: SlideRun, scale) -> None:
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
        words = getattr(run, "tokens", ())
        if words and len(words) == M.shape[0]:  # a real sentence: its words (issue #35)
            ticks = range(len(words))
            ax.set_xticks(ticks, words, rotation=90, fontsize=8)
            ax.set_yticks(ticks, words, fontsize=8)
            ax.set_xlabel("source word j")
            ax.set_ylabel("query word i")
        else:
            ax.set_xlabel("source j")
            ax.set_ylabel("query i")
    fig.colorbar(image, ax=[ax_a, ax_s], shrink=0.9, pad=0.01)


def _project(rec: RunRecord, mean, axes_) -> np.ndarray:
    return (rec.features - mean) @ axes_.T  # (T, N, 2)


def draw_tokens(ax, rec: RunRecord, pinned) -> None:
    """The tokens' paths on the principal axes of ``X(0)``, the pinned runs' dashed and
    grey beneath (on their own axes when N or d differ)."""
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


def draw_kl(ax, rec: RunRecord, pinned, labels, log_kl: bool) -> None:
    """The lag ``Σᵢ KL(Aᵢ‖A*ᵢ)`` and its tracking bound, the pinned runs' as ghosts;
    ``labels`` are their :func:`app.teaching.run_record.comparison_labels`."""

    def shown(v):
        return np.maximum(v, LOG_FLOOR) if log_kl else v

    now = labels[0][1] if labels else None
    notes = []
    for key, label, color, style in (
            ("kl", "Σᵢ KL(Aᵢ‖A*ᵢ)" + (f" — {now}" if now else ""), RUN_COLOR, "-"),
            ("kl_bound", "tracking bound Σ Bᵢ²/8", BOUND_COLOR, "--")):
        note = not_drawn_note(rec.model, key)
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


def draw_energy(ax, rec: RunRecord, pinned, labels) -> None:
    """The energy balance: the energy's change, the work less the dissipated, the
    dissipated and the residual; the pinned runs' energy change as ghosts."""
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


def draw_rate(ax, rec: RunRecord) -> None:
    """The dissipation rate ``D(t)`` (or why it is not drawn)."""
    note = not_drawn_note(rec.model, "dissipation_rate")
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


def not_drawn_note(model: str, diagnostic: str) -> str:
    """Why ``diagnostic`` is not drawn for ``model`` (as the page says), or ``""``."""
    if diagnostic in not_applicable(model):
        return "n/a for this model"
    if diagnostic in spec(model).identically_zero:
        return ZERO_NOTE
    return ""


def draw_distance(ax, t: np.ndarray, distance: np.ndarray) -> None:
    """The distance ``‖X − X_reduced‖`` to the reduced model's run, shape (T,) each."""
    ax.plot(t, distance, color="#8c564b", lw=2, label="‖X − X_reduced‖ (Frobenius)")
    ax.set_title("Distance to the reduced model", fontsize=12)
    ax.set_xlabel("t")
    ax.set_ylabel("‖X − X_reduced‖")
    ax.legend(fontsize=9, loc="best")


def _finite(v: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(v), v, np.nan)
