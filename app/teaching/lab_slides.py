"""The inertial lab's slides: its six plots (:func:`lab_slide_figure`), and the base
case's momentum on a quadratic (:func:`momentum_slide_figure`), each one 16:9 figure."""

from __future__ import annotations

import math
from itertools import cycle
from typing import TYPE_CHECKING

from .slide_page import DPI, SLIDE_INCHES, plain_caption, wrap

if TYPE_CHECKING:  # Matplotlib is imported when a slide is drawn, not with the page
    from matplotlib.figure import Figure


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
    fig.suptitle(title if not text else f"{title}\n{wrap(text, 120)}", fontsize=15)
    from app.lab.inertial_lab import CONTROLS  # the settings the lab shows

    shown = ("model", "kernel_diag", "value_diag", *CONTROLS)
    fig.supxlabel(wrap(" · ".join(f"{k} = {result.settings[k]}" for k in shown
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
    for t, color, label in ((result.first_order_time, "C0", "Tₘₐₓ"),
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
    # the values themselves on the axis, not an offset and a multiplier above it
    # ("1e−5−5e−1" read as a label, issue #35)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
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

    from app.lab.momentum_plots import RUN_STYLES

    fig = Figure(figsize=SLIDE_INCHES, dpi=DPI, layout="constrained")
    text = plain_caption(caption)
    fig.suptitle(title if not text else f"{title}\n{wrap(text, 120)}", fontsize=15)
    shown = ("kernel_diag", "n_tokens", "dim", "seed", "alpha", "nesterov_r", "nesterov_t0")
    fig.supxlabel(wrap(" · ".join(f"{k} = {result.settings[k]}" for k in shown)
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
