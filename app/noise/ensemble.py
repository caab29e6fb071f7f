"""The noise ensemble view (Theory page: stochastic logits).

Runs ``K`` replicas of the main tab's settings with independent logit noise
(:func:`dynamics.ensemble.run_ensemble`: the same initial data, the noise streams of one
``SeedSequence`` of the seed) and draws the mean ± one standard deviation of the KL lag,
the free energy and the dissipation rate, with the small-noise stationary prediction
``½ s² Σ_i (1 − Σ_j A*_ij²)`` as a dashed reference line on the KL plot. The noise σ is
the main tab's ``logit_noise`` slider (built from the setting like every control).

The tab never opens empty: it shows an example at once (:meth:`EnsembleView.start` of
:meth:`EnsembleView.example_settings`: the main tab's settings, with σ = 0.5 where σ
is 0) and says how to run one's own. A run goes on in a thread of its own: the plots
keep the last result, a progress bar counts the replicas, then the new bands replace
them. The widgets' bounds are the view's (K ≤ 256, t_end ≤ 1000); a value typed
outside them is refused by name, not silently reverted.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource
from bokeh.palettes import Category10_10 as C
from bokeh.plotting import figure

from app.serving.server import locked
from dynamics import Settings, models
from dynamics.ensemble import run_ensemble

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
#: σ of the example shown at first when the main tab's σ is 0 (no band to show).
EXAMPLE_SIGMA = 0.5
#: How to run one's own ensemble (under the example).
YOUR_OWN = ("Your own: set σ with the main tab's slider (and any other setting there), "
            "choose K and t_end here and press **Run ensemble**.")


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
    """K noisy replicas of the current settings: mean ± one std bands.

    Parameters
    ----------
    example : bool
        Start the example run at once (:meth:`example_settings`): the tab of the page
        opens with bands.
    """

    settings = param.ClassSelector(class_=Settings, doc="The main tab's settings.")
    # defaults sized for a click: 8 replicas of 300 noisy steps (dt = 0.01) take ~2 s
    replicas = param.Integer(default=8, bounds=(2, 256),
                             doc="Number K of replicas, each with its own noise.")
    t_end = param.Number(default=3.0, bounds=(0.01, 1e3),
                         doc="How long each replica runs (model time).")

    def __init__(self, example: bool = False, **params):
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
        self.run_button.on_click(locked(lambda _: self.start()))
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.progress = pn.indicators.Progress(value=0, max=self.replicas, width=300,
                                               visible=False)
        lo, hi = self.param.replicas.bounds
        self.replicas_input = pn.widgets.IntSlider.from_param(
            self.param.replicas, label="K (replicas)", start=lo, end=hi)
        # unbounded in the page: a value outside the bounds is refused by name
        # (:meth:`_typed_t_end`), not silently reverted by the browser
        self.t_end_input = pn.widgets.FloatInput(label="t_end", value=self.t_end,
                                                 start=None, end=None, width=160)
        self.t_end_input.param.watch(self._typed_t_end, "value")
        self.ensemble = None
        self._thread: threading.Thread | None = None
        self._doc = None
        if example:
            self.start(self.example_settings(), example=True)

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

    def _typed_t_end(self, event) -> None:
        """A typed t_end: taken within the bounds, else refused by name (and undone)."""
        lo, hi = self.param.t_end.bounds
        value = event.new
        if value is not None and lo <= value <= hi:
            self.t_end = float(value)
            return
        self.message.object = (
            f"**t_end = {value} not accepted:** it must be between {lo:g} and {hi:g} "
            f"(model time); kept t_end = {self.t_end:g}.")
        self.t_end_input.value = self.t_end

    def notice(self, settings: Settings | None = None) -> str:
        """What the settings mean for an ensemble (no noise, or no relaxing attention)."""
        settings = settings if settings is not None else self.settings
        spec = models.get(settings.model)
        if "logit_noise" not in spec.reads():
            return (f"**{spec.title}** does not relax attention: no logit noise, the "
                    "replicas coincide. Choose a model that relaxes attention.")
        if settings.logit_noise == 0.0:
            return ("σ (logit noise) is 0: the replicas coincide (no band). Move the σ "
                    "slider on the main tab.")
        return ""

    def example_settings(self) -> Settings:
        """The first example's settings: the main tab's, with σ = :data:`EXAMPLE_SIGMA`
        where σ is 0, on the attention-only model (features at rest) where the main
        tab's model has no logit noise."""
        settings = self.settings.copy()
        if "logit_noise" not in models.get(settings.model).reads():
            return Settings(model="attention", path="static", n_tokens=settings.n_tokens,
                            dim=settings.dim, seed=settings.seed, logit_noise=EXAMPLE_SIGMA)
        if settings.logit_noise == 0.0:
            settings.logit_noise = EXAMPLE_SIGMA
        return settings

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _refused(self, settings: Settings) -> str:
        """Why an ensemble of ``settings`` may not start from a click, or ``""``."""
        n_steps = max(1, round(self.t_end / settings.dt))
        if self.replicas * n_steps > MAX_STEPS:
            return (f"The ensemble could not run: K × t_end/dt = {self.replicas} × {n_steps} "
                    f"= {self.replicas * n_steps:,} steps, more than {MAX_STEPS:,} (about a "
                    "minute): lower K or t_end, or raise dt.")
        return ""

    def run(self, settings: Settings | None = None) -> None:
        """Run the ensemble of the current settings (or ``settings``) and draw its bands
        (at once, on this thread)."""
        settings = (settings if settings is not None else self.settings).copy()
        refused = self._refused(settings)
        if refused:
            self.message.object = refused
            return
        self._show(settings, *self._compute(settings))

    def start(self, settings: Settings | None = None, example: bool = False,
              wait: bool = False) -> bool:
        """Run the ensemble in a thread of its own (on a page; at once without one):
        the plots keep the last bands and a progress bar counts the replicas until the
        new bands replace them. False, with a message, when refused or running."""
        if self.running:
            return False
        settings = (settings if settings is not None else self.settings).copy()
        refused = self._refused(settings)
        if refused:
            self.message.object = refused
            return False
        doc = pn.state.curdoc
        self._doc = doc if getattr(doc, "session_context", None) else None
        what = "the example" if example else "the ensemble"
        self.message.object = (f"computing {what}: K = {self.replicas} replicas to "
                               f"t = {self.t_end:g}… (the plots show the last result until "
                               "it is done)")
        self.progress.param.update(value=0, max=self.replicas, visible=True)
        self.run_button.disabled = True

        def work():
            result = self._compute(settings, progress=lambda done, total: self._schedule(
                lambda: setattr(self.progress, "value", done)))
            self._schedule(lambda: self._show(settings, *result, example=example))

        if self._doc is None:
            work()
            return True
        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()
        return True

    def _schedule(self, fn: Callable) -> None:
        """Run ``fn`` on the session's next tick, under its document lock (at once
        without a server)."""
        if self._doc is not None:
            from panel.io.state import set_curdoc

            with set_curdoc(self._doc):
                pn.state.execute(fn, schedule=True)
        else:
            fn()

    def _compute(self, settings: Settings, progress=None):
        """The ensemble of ``settings`` (K and t_end of the view), or ``(None, error)``."""
        n_steps = max(1, round(self.t_end / settings.dt))
        every = max(1, math.ceil(n_steps / MAX_FRAMES))
        try:
            return run_ensemble(settings, self.replicas, self.t_end, every=every,
                                progress=progress), ""
        except Exception as err:  # named on the page; the tab keeps working
            return None, str(err) if isinstance(err, ValueError) else \
                f"{type(err).__name__}: {err}"

    def _show(self, settings: Settings, ens, error: str = "", example: bool = False) -> None:
        """Draw ``ens`` (or say why it could not run: the last bands stay)."""
        self.progress.visible = False
        self.run_button.disabled = False
        if ens is None:
            self.message.object = f"The ensemble could not run: {error}"
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
        if example:
            why = ""
            if settings.model != self.settings.model:
                why = f" (the main tab's model, {self.settings.model}, has no logit noise)"
            elif self.settings.logit_noise == 0.0:
                why = f" (σ = {EXAMPLE_SIGMA:g}: the main tab's σ is 0)"
            parts.insert(0, f"**Example shown at first**{why}:")
            parts.append(YOUR_OWN)
        else:
            note = self.notice(settings)
            if note:
                parts.append(note)
        self.message.object = " ".join(parts)

    def __panel__(self):
        controls = pn.Row(self.replicas_input, self.t_end_input, self.run_button,
                          self.progress)
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
