"""Real heads on the main tab (Theory page: "A real head on a real sentence", "Several
heads"): word labels on the heatmaps' axes and beside the tokens, a grid of every head's
attention when a layer runs with all its heads, the model's own attention beside A*, your
own sentence on a checkpoint (issue #28), and the upload of your own weights file.

The plots read the frames (``frame.tokens``, ``frame.heads``); the backend knows nothing of
them. The choice of a real head is kept to what exists: the layer and head sliders span the
checkpoint's (or the shipped file's) layers and heads, the shipped sentences are chosen by
their text, and a choice that does not exist (a URL, pasted settings, a typed sentence) is
refused with a notice and the page keeps running (:func:`fit_real_head`,
:meth:`RealHeads.refuse`). What exists and the fitting are in :mod:`app.mainview.head_choice`,
the reading of an uploaded file in :mod:`app.mainview.uploads`.
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, FixedTicker, LabelSet, LinearColorMapper
from bokeh.palettes import Viridis256
from bokeh.plotting import figure
from scipy.special import softmax

from dynamics import Settings, Simulation, real_heads
from dynamics.weights_file import WEIGHT_ARRAYS

from .head_choice import (
    CHOICE,
    ENABLE_HINT,
    checkpoint_installed,
    choices,
    find_checkpoint,
    fit_real_head,
    sentence_select,
)
from .uploads import clear_upload, in_file_terms, read_upload

#: Columns of the grid of heads.
GRID_COLUMNS = 4
#: Most numbered ticks on a heatmap's axis (a seeded run's tokens).
MAX_NUMBERS = 10


def number_ticks(n: int, most: int = MAX_NUMBERS) -> list[int]:
    """The tokens numbered on an axis of ``n`` tokens: every one up to ``most``, else
    every 2nd, 5th, 10th, 20th, … from 0."""
    step = next(s for m in (1, 10, 100, 1000, 10_000) for s in (m, 2 * m, 5 * m)
                if -(-n // s) <= most)
    return list(range(0, n, step))


def label_axes(figures, tokens, n: int | None = None) -> None:
    """Label both axes of the heatmaps with the word pieces, or with the token numbers
    of ``n`` tokens when ``tokens`` is empty (a seeded run).

    Every label is set from the run shown (ticks and their texts alike): the page keeps
    an axis's old texts when its overrides are merely emptied, so a seeded run after a
    real head read that head's words at its numbered ticks (issue #27, item 1). Every
    token of the run gets its text (a seeded run's numbers too, not only those ticked),
    so no text of the previous run is left at any position, and the ticks and texts of
    every axis change in one document change, each axis keeping its ticker model (its
    ticks change), so the page never shows the new ticks with the old texts (issue #35,
    item 7: "0, the, 2, didn, 4, t").
    """
    n = len(tokens) if tokens else max(n or 1, 1)
    ticks = list(range(n)) if tokens else number_ticks(n)
    texts = ({i: t for i, t in enumerate(tokens)} if tokens
             else {i: str(i) for i in range(n)})
    with pn.io.hold():
        for fig in figures:
            for axis in (fig.xaxis[0], fig.yaxis[0]):
                if isinstance(axis.ticker, FixedTicker):
                    axis.ticker.ticks = ticks
                else:
                    axis.ticker = FixedTicker(ticks=ticks)
                axis.major_label_overrides = texts
            fig.xaxis[0].major_label_orientation = math.pi / 2 if tokens else "horizontal"
            fig.xaxis[0].axis_label = "source word j" if tokens else "source token j"
            fig.yaxis[0].axis_label = "query word i" if tokens else "query token i"


def tile(heads: np.ndarray, columns: int = GRID_COLUMNS, gap: int = 1) -> np.ndarray:
    """The heads' maps tiled in a grid (rows of ``columns``, ``gap`` NaN pixels between),
    shape (H, N, N) → (rows·(N+gap) − gap, columns·(N+gap) − gap); head ``h`` at row
    ``h // columns``, column ``h % columns``, read top to bottom."""
    H, N, _ = heads.shape
    rows = -(-H // columns)
    out = np.full((rows * (N + gap) - gap, columns * (N + gap) - gap), np.nan)
    for h in range(H):
        r, c = divmod(h, columns)
        out[r * (N + gap):r * (N + gap) + N, c * (N + gap):c * (N + gap) + N] = heads[h]
    return out


class RealHeads(pn.viewable.Viewer):
    """Word labels, the grid of heads and the weights upload of one dashboard."""

    def __init__(self, dashboard, **params):
        super().__init__(**params)
        self.dashboard = dashboard
        self._tokens = None  # (words, N) of the run labelled
        mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0, nan_color="white")
        self.grid_fig = figure(title="Every head's attention A_h (head 0 top left)",
                               width=310, height=300, tools="save", toolbar_location=None,
                               x_range=(0, 1), y_range=(1, 0))
        self.grid_fig.axis.visible = False
        self.grid_fig.grid.visible = False
        self.grid = ColumnDataSource({"image": [np.zeros((1, 1), dtype=np.float32)],
                                      "dw": [1], "dh": [1]})
        self.grid_fig.image(image="image", x=0, y=0, dw="dw", dh="dh", color_mapper=mapper,
                            source=self.grid)
        self.grid_fig.visible = False
        # the model's own attention (its forward pass), beside A*: equal at β = 1
        self.model_fig = figure(title="The model's attention (= A* at β = 1)", width=310,
                                height=300, tools="save", toolbar_location=None,
                                x_range=(-0.5, 0.5), y_range=(0.5, -0.5))
        self.model_fig.grid.visible = False
        self.model_fig.title.text_font_size = "12px"
        self.model_image = ColumnDataSource({"image": [np.zeros((1, 1), dtype=np.float32)],
                                             "dw": [1], "dh": [1], "x": [-0.5]})
        self.model_fig.image(image="image", x="x", y="x", dw="dw", dh="dh",
                             color_mapper=mapper, source=self.model_image)
        self.model_fig.visible = False
        self._model_key = self._model_beta = self._model_head = None
        dashboard.settings.param.watch(self._retitle, "beta")
        #: the real-head figures of the main tab (the model's attention, the heads' grid)
        self.figures = (self.model_fig, self.grid_fig)
        # your own sentence: where it is enabled, and why not
        self.installed = checkpoint_installed(dashboard.settings)
        self.sentence_note = pn.pane.Markdown(
            "" if self.installed else ENABLE_HINT,
            sizing_mode="stretch_width", margin=(0, 10))
        self.controls = None
        self.words = ColumnDataSource({"x": [], "y": [], "word": []})
        self.dashboard.trajectories.fig.add_layout(LabelSet(
            x="x", y="y", text="word", source=self.words, x_offset=5, y_offset=3,
            text_font_size="9pt", text_color="#444444"))
        self.upload = pn.widgets.FileInput(accept=".npz", multiple=False,
                                           sizing_mode="stretch_width")
        self.upload_label = pn.pane.Markdown(
            "Weights file (`.npz`): `X` (N×d) and optionally `P`, `M`, `W_V` "
            "(S = X M Xᵀ; see the Theory page, *A real head on a real sentence*).",
            sizing_mode="stretch_width", margin=(0, 10))
        # what became of a file: said under its picker (issue #27, item 9)
        self.upload_note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self._file = None  # (name, (N, d)) of the uploaded arrays
        self.upload.param.watch(self._on_upload, "value")
        dashboard.settings.param.watch(self._show_source, ["weights", "n_tokens", "dim"])

    # -- the choice of a real head -------------------------------------------------
    def attach(self, controls) -> None:
        """Fit the controls to what exists: the shipped sentences chosen by their text,
        the layer and head sliders spanning the layers and heads of the shipped file or
        of the checkpoint (again whenever the weights change), the weights menu offering
        a checkpoint only where one is installed."""
        self.controls = controls
        widgets = controls.widgets
        settings = self.dashboard.settings
        if "sentence" in widgets:
            widgets["sentence"] = sentence_select(settings)
        if "text" in widgets:
            widgets["text"].param.update(
                placeholder="Type a sentence, then press Enter",
                description=f"{Settings.param.text.doc} Enter restarts the run on it.")
        settings.param.watch(lambda *_: self.fit_sliders(), ["weights", "checkpoint"])
        self.fit_sliders()
        self._show_source()
        controls.update_visibility()

    def fit_sliders(self) -> None:
        """The layer and head sliders span the layers and heads that exist (the shipped
        file's 2 and 5 as one step of 3)."""
        if self.controls is None:
            return
        settings = self.dashboard.settings
        checkpoint = find_checkpoint(settings) if settings.weights == "checkpoint" else None
        layers, n_heads = choices(settings.weights, checkpoint)
        steps = {b - a for a, b in zip(layers, layers[1:], strict=False)}
        widgets = self.controls.widgets
        if "layer" in widgets:
            widgets["layer"].param.update(start=layers[0], end=max(layers[-1], layers[0] + 1),
                                          step=steps.pop() if len(steps) == 1 else 1)
        if "head" in widgets:
            widgets["head"].param.update(start=0, end=max(n_heads - 1, 1))

    def refuse(self, events, err) -> None:
        """A setting change whose run cannot be built (``err``): say so in the notice and
        beside the sentence box, and keep the page running: a change of the weights is
        fitted (:func:`fit_real_head`), any other change (a typed sentence, a layer from
        pasted settings) undone."""
        dash = self.dashboard
        names = {e.name for e in events if e.name in Settings.names()}
        fixed = fit_real_head(dash.settings) if names & {"weights", "checkpoint"} else []
        if not fixed:
            dash.settings.param.update(**{e.name: e.old for e in events if e.name in names})
        self.show_refusal("\n".join(fixed) or f"Not applied: {err}")

    def show_refusal(self, message: str) -> None:
        """``message`` in the page's notice (cleared by the next restart) and under the
        sentence box."""
        dash = self.dashboard
        dash.show_error(message)
        if dash.settings.weights == "checkpoint":
            self.sentence_note.object = f"**{message}**"

    @property
    def has_words(self) -> bool:
        """The run shown is a sentence: words label the heatmaps' rows and columns."""
        return bool(self._tokens and self._tokens[0])

    # -- frames ------------------------------------------------------------------
    def update(self, frame) -> None:
        """Show the words and the heads of ``frame`` (after the heatmaps and tokens)."""
        tokens = tuple(frame.tokens)
        labels = (tokens, frame.features.shape[0])  # the run's words, or its N
        if labels != self._tokens:
            self._tokens = labels
            label_axes((*self.dashboard.heatmaps.figures, self.model_fig), tokens, labels[1])
            if self.installed and not self.dashboard.run_error:
                self.sentence_note.object = ""
        self._show_model_attention(frame)
        if tokens:
            data = self.dashboard.trajectories.tokens.data
            self.words.data = {"x": list(data["x"]), "y": list(data["y"]),
                               "word": list(tokens)}
        elif len(self.words.data["x"]):
            self.words.data = {"x": [], "y": [], "word": []}
        heads = frame.heads
        self.grid_fig.visible = heads is not None
        if heads is not None:
            image = tile(heads).astype(np.float32)
            rows, cols = image.shape
            self.grid_fig.x_range.end, self.grid_fig.y_range.start = cols, rows
            self.grid.data = {"image": [image], "dw": [cols], "dh": [rows]}

    def _show_model_attention(self, frame) -> None:
        """The true attention of the head shown (a real head only), and in the title how
        far A* of the sentence's input features at the current β is from it (rounding at
        β = 1: the scores are the model's)."""
        values = self.dashboard.settings.values()
        key = (tuple(frame.tokens), *(values[k] for k in CHOICE))
        if key != self._model_key:  # (a new run: its restart shows or hides the plot)
            self._model_key, self._model_beta, self._model_head = key, None, None
            if frame.tokens and values["weights"] != "seed":
                try:
                    real = real_heads.chosen(values)
                except ValueError:
                    real = None
                if real is not None and real.tokens == tuple(frame.tokens):
                    self._model_head = real
            self.model_fig.visible = self._model_head is not None
            if self._model_head is not None:
                n = len(frame.tokens)
                self.model_fig.x_range.end = self.model_fig.y_range.start = n - 0.5
                self.model_image.data = {
                    "image": [self._model_head.attention[0].astype(np.float32)],
                    "dw": [n], "dh": [n], "x": [-0.5]}
        self._retitle()

    def _retitle(self, *events) -> None:
        """The model attention's title: how far A* of the sentence's input at the current
        β is from it (β changes the title only: the run goes on)."""
        real, beta = self._model_head, self.dashboard.settings.beta
        if real is None or beta == self._model_beta:
            return
        self._model_beta = beta
        X, M, _ = real.scaled()
        gap = float(np.abs(softmax(beta * (X @ M[0] @ X.T), axis=1) - real.attention[0]).max())
        # (the gap in plain digits, the title in 12 px: "max diff 7e-01" was cut to
        # "max diff 7e-" at the plot's width)
        self.model_fig.title.text = (f"The model's attention, head {real.heads[0]}\nA* of "
                                     f"its input at β = {beta:.3g}: max diff {gap:.2g}")

    # -- your own weights --------------------------------------------------------
    def _on_upload(self, event) -> None:
        if event.new is None:
            return
        name = self.upload.filename or "your file"
        try:
            arrays = read_upload(self.upload)
            self.apply(arrays)
        except ValueError as err:
            self.upload_note.object = f"**Not used:** {in_file_terms(str(err))}"
            clear_upload(self.upload)
            self._show_source()
            return
        X = arrays["features"]
        self._file = (name, np.shape(X))
        names = ", ".join(k for k, v in WEIGHT_ARRAYS.items() if v in arrays)
        self.upload_note.object = (f"Running your weights: N = {X.shape[0]}, "
                                   f"d = {X.shape[1]} ({names}).")
        self._show_source()

    def _show_source(self, *events) -> None:
        """The Weights menu names what runs: the uploaded file while its arrays serve the
        run (seeded weights of its N and d: :class:`~dynamics.Simulation` keeps them for
        every restart they fit), "seed" or "minilm" otherwise (issue #27, item 7)."""
        controls = getattr(self.dashboard, "controls", None)
        widget = controls.widgets.get("weights") if controls is not None else None
        if widget is None:
            return
        s = self.dashboard.settings
        runs_file = self._file is not None and s.weights == "seed" \
            and (s.n_tokens, s.dim) == tuple(self._file[1])
        offered = [v for v in s.param.weights.objects
                   if v != "checkpoint" or self.installed]  # only what exists
        options = {f"your file: {self._file[0]}" if runs_file and v == "seed" else v: v
                   for v in offered}
        shown = widget.options
        if (shown if isinstance(shown, dict) else {v: v for v in shown}) != options:
            widget.options = options

    def apply(self, arrays: dict) -> None:
        """Run the dashboard's model from ``arrays`` (the :class:`~dynamics.Simulation`
        keywords of a weights file); ``ValueError`` if they do not fit it."""
        dash = self.dashboard
        if "kernel" in arrays or "value" in arrays:
            raise ValueError("A and V are Part II arrays: upload this file in the Inertial "
                             "lab tab, or run it with python -m dynamics run --weights FILE "
                             "--model linear_accelerated (or another Part II model)")
        X = np.asarray(arrays["features"])
        if X.ndim != 2:
            raise ValueError(f"X must be a matrix (N, d), got shape {X.shape}")
        values = {"weights": "seed", "heads": "one", "n_tokens": X.shape[0], "dim": X.shape[1]}
        Simulation(dash.settings.copy(**values), **arrays)  # refuses what does not fit
        with dash.changing():
            dash.settings.param.update(**values)
        dash.sim = Simulation(dash.settings, **arrays)
        dash.reset()

    def __panel__(self):
        return pn.Column(self.sentence_note, self.upload_label, self.upload, self.upload_note,
                         sizing_mode="stretch_width")
