"""The noise ensemble view (Theory page: stochastic logits).

Runs ``K`` replicas of the main tab's settings with independent logit noise
(:func:`dynamics.ensemble.run_ensemble`: the same initial data, the noise streams of one
``SeedSequence`` of the seed) and draws the mean ± one standard deviation of the KL lag,
the free energy and the dissipation rate, with the small-noise stationary prediction
``½ s² Σ_i (1 − Σ_j A*_ij²)`` as a dashed reference line on the KL plot. The noise σ is
the main tab's ``logit_noise`` slider (built from the setting like every control).
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource
from bokeh.palettes import Category10_10 as C
from bokeh.plotting import figure

from dynamics import Settings, models
from dynamics.ensemble import run_ensemble

from .server import locked

#: The bands drawn: (diagnostic, title, y label).
BANDS = (
    ("kl", "Attention lag Σ KL(A‖A*)", "KL"),
    ("free_energy", "Free energy F(A; X)", "F"),
    ("dissipation_rate", "Dissipation rate D", "D"),
)
#: Most frames an ensemble records (the step between frames grows with the run's length).
MAX_FRAMES = 400
#: Most steps of one ensemble, summed over its replicas (K · t_end/dt). The ensemble runs
#: on the page's thread under the document lock, about 1 ms per noisy step at N ≤ 32: this
#: caps a click at about a minute (the default, 8 × 300 steps, takes ~2 s; the widgets'
#: bounds, K = 256 and t_end = 1000, would otherwise hold the server for hours).
MAX_STEPS = 50_000


def band_columns(ensemble) -> dict:
    """The plot columns of an :class:`~dynamics.ensemble.Ensemble`: ``t``, per band
    ``<name>_mean``, ``<name>_lo``, ``<name>_hi`` (mean ∓ one standard deviation), and
    ``prediction`` (NaN values become 0: nothing non-finite reaches the page)."""
    cols = {"t": ensemble.times}
    for name, _, _ in BANDS:
        mean = ensemble.mean(name)
        std = ensemble.std(name) if ensemble.replicas > 1 else np.zeros_like(mean)
        std = np.where(np.isfinite(std), std, 0.0)
        cols[f"{name}_mean"] = mean
        cols[f"{name}_lo"] = mean - std
        cols[f"{name}_hi"] = mean + std
    cols["prediction"] = ensemble.prediction
    return {k: np.where(np.isfinite(v), v, 0.0) for k, v in cols.items()}


class EnsembleView(pn.viewable.Viewer):
    """K noisy replicas of the current settings: mean ± one std bands."""

    settings = param.ClassSelector(class_=Settings, doc="The main tab's settings.")
    # defaults sized for a click: 8 replicas of 300 noisy steps (dt = 0.01) take ~2 s
    replicas = param.Integer(default=8, bounds=(2, 256), softbounds=(2, 64),
                             doc="Number K of replicas, each with its own noise.")
    t_end = param.Number(default=3.0, bounds=(0.01, 1e3), softbounds=(0.1, 20.0),
                         doc="How long each replica runs (model time).")

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource({k: [] for k in self._columns()})
        self.figures = [self._figure(*band, color=C[i]) for i, band in enumerate(BANDS)]
        kl = self.figures[0]
        self.reference = kl.line("t", "prediction", source=self.source, color="black",
                                 line_dash="dashed", line_width=1.5,
                                 legend_label="small-noise stationary prediction")
        for fig in self.figures:  # below the plot, where the legend covers no band
            fig.legend[0].update(label_text_font_size="9pt", padding=2, spacing=2, margin=2,
                                 ncols=2, border_line_alpha=0, glyph_width=18, label_width=90,
                                 location="top_left")
            fig.add_layout(fig.legend[0], "below")
        self.run_button = pn.widgets.Button(label="Run ensemble", color="primary")
        self.run_button.on_click(locked(lambda _: self.run()))
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.ensemble = None

    @staticmethod
    def _columns():
        names = ["t", "prediction"]
        for name, _, _ in BANDS:
            names += [f"{name}_mean", f"{name}_lo", f"{name}_hi"]
        return names

    def _figure(self, name, title, y_label, color):
        fig = figure(title=title, height=300, width=430, x_axis_label="t (model time units)",
                     y_axis_label=y_label, tools="pan,wheel_zoom,box_zoom,reset,save",
                     toolbar_location="above")
        fig.varea("t", f"{name}_lo", f"{name}_hi", source=self.source, color=color, alpha=0.25,
                  legend_label="mean ± 1 std")
        fig.line("t", f"{name}_mean", source=self.source, color=color, line_width=2,
                 legend_label="mean")
        return fig

    def notice(self) -> str:
        """What the settings mean for an ensemble (no noise, or no relaxing attention)."""
        spec = models.get(self.settings.model)
        if "logit_noise" not in spec.reads():
            return (f"**{spec.title}** does not relax attention: no logit noise, the "
                    "replicas coincide. Choose a model that relaxes attention.")
        if self.settings.logit_noise == 0.0:
            return ("σ (logit noise) is 0: the replicas coincide (no band). Move the σ "
                    "slider on the main tab.")
        return ""

    def run(self) -> None:
        """Run the ensemble of the current settings and draw its bands."""
        settings = self.settings.copy()
        n_steps = max(1, round(self.t_end / settings.dt))
        if self.replicas * n_steps > MAX_STEPS:
            self.message.object = (
                f"The ensemble could not run: K × t_end/dt = {self.replicas} × {n_steps} = "
                f"{self.replicas * n_steps:,} steps, more than {MAX_STEPS:,} (about a "
                "minute): lower K or t_end, or raise dt.")
            return
        every = max(1, math.ceil(n_steps / MAX_FRAMES))
        try:
            ens = run_ensemble(settings, self.replicas, self.t_end, every=every)
        except ValueError as err:
            self.message.object = f"The ensemble could not run: {err}"
            return
        self.ensemble = ens
        self.source.data = band_columns(ens)
        # no prediction (a model that does not relax attention): no line, rather than 0
        self.reference.visible = bool(np.any(np.isfinite(ens.prediction)))
        stopped = sum(s != "running" for s in ens.statuses)
        parts = [f"K = {ens.replicas} replicas, σ = {settings.logit_noise:g}, "
                 f"model {settings.model}, t = 0 … {ens.times[-1]:.4g}."]
        if stopped:
            parts.append(f"{stopped} replica(s) stopped early (bands use the others).")
        note = self.notice()
        if note:
            parts.append(note)
        self.message.object = " ".join(parts)

    def __panel__(self):
        controls = pn.Row(
            pn.widgets.IntSlider.from_param(self.param.replicas, name="K (replicas)"),
            pn.widgets.FloatInput.from_param(self.param.t_end, name="t_end"),
            self.run_button)
        intro = pn.pane.Markdown(
            "Replicas of the main tab's settings with independent noise on the logits "
            "(σ: the main tab's slider). Bands: mean ± one standard deviation; dashed: "
            "the small-noise stationary KL (exact for features at rest). See the Theory "
            'page, <a href="#stochastic-logits">stochastic logits</a>.',
            sizing_mode="stretch_width")
        return pn.Column(intro, controls, self.message,
                         pn.FlexBox(*[pn.pane.Bokeh(f) for f in self.figures]),
                         sizing_mode="stretch_width")


__all__ = ["BANDS", "EnsembleView", "band_columns"]
