"""Real heads on the main tab (Theory page: "A real head on a real sentence", "Several
heads"): word labels on the heatmaps' axes and beside the tokens, a grid of every head's
attention when a layer runs with all its heads, and the upload of your own weights file.

Everything here reads the frames (``frame.tokens``, ``frame.heads``); the backend knows
nothing of it.
"""

from __future__ import annotations

import io
import math
import re

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, FixedTicker, LabelSet, LinearColorMapper
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from dynamics import Simulation
from dynamics.cli import WEIGHT_ARRAYS, read_weights

#: Columns of the grid of heads.
GRID_COLUMNS = 4
#: Largest upload accepted (bytes).
MAX_UPLOAD = 50_000_000


def in_file_terms(message: str) -> str:
    """``message`` with the :class:`~dynamics.Simulation` keywords of a weights file's
    arrays named by the file's keys (``score_matrix`` → ``M``, :data:`WEIGHT_ARRAYS`)
    and ``n_tokens``, ``dim`` as N, d: an upload's error speaks of what is in the file."""
    for key, keyword in WEIGHT_ARRAYS.items():
        message = re.sub(rf"\b{keyword}\b", key, message)
    return message.replace("n_tokens=", "N = ").replace("dim=", "d = ")


def read_upload(upload) -> dict:
    """The :class:`~dynamics.Simulation` arrays of the ``.npz`` file chosen in ``upload``
    (a :class:`panel.widgets.FileInput`), messages naming it by its file name;
    ``ValueError`` for a file over :data:`MAX_UPLOAD` or one :func:`read_weights` refuses."""
    name = upload.filename or "the file"
    if len(upload.value) > MAX_UPLOAD:
        raise ValueError(f"{name} is larger than {MAX_UPLOAD // 1_000_000} MB")
    return read_weights(io.BytesIO(upload.value), name=name)


def clear_upload(upload) -> None:
    """Empty ``upload`` (server and page), so that the same file can be chosen again."""
    upload.value = None
    upload.clear()


#: Most numbered ticks on a heatmap's axis (a seeded run's tokens).
MAX_NUMBERS = 10


def number_ticks(n: int) -> list[int]:
    """The tokens numbered on an axis of ``n`` tokens: every one up to
    :data:`MAX_NUMBERS`, else every 2nd, 5th, 10th, 20th, … from 0."""
    step = next(s for m in (1, 10, 100, 1000, 10_000) for s in (m, 2 * m, 5 * m)
                if -(-n // s) <= MAX_NUMBERS)
    return list(range(0, n, step))


def label_axes(figures, tokens, n: int | None = None) -> None:
    """Label both axes of the heatmaps with the word pieces, or with the token numbers
    of ``n`` tokens when ``tokens`` is empty (a seeded run).

    Every label is set from the run shown (ticks and their texts alike): the page keeps
    an axis's old texts when its overrides are merely emptied, so a seeded run after a
    real head read that head's words at its numbered ticks (issue #27, item 1).
    """
    ticks = list(range(len(tokens))) if tokens else number_ticks(n or 1)
    texts = ({i: t for i, t in enumerate(tokens)} if tokens
             else {i: str(i) for i in ticks})
    for fig in figures:
        for axis in (fig.xaxis[0], fig.yaxis[0]):
            axis.update(ticker=FixedTicker(ticks=ticks), major_label_overrides=texts)
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

    # -- frames ------------------------------------------------------------------
    def update(self, frame) -> None:
        """Show the words and the heads of ``frame`` (after the heatmaps and tokens)."""
        tokens = tuple(frame.tokens)
        labels = (tokens, frame.features.shape[0])  # the run's words, or its N
        if labels != self._tokens:
            self._tokens = labels
            label_axes(self.dashboard.heatmaps.figures, tokens, labels[1])
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
        options = {f"your file: {self._file[0]}" if runs_file and v == "seed" else v: v
                   for v in s.param.weights.objects}
        if dict(widget.options) != options:
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
        with dash._changing():
            dash.settings.param.update(**values)
        dash.sim = Simulation(dash.settings, **arrays)
        dash.reset()

    def __panel__(self):
        return pn.Column(self.upload_label, self.upload, self.upload_note,
                         sizing_mode="stretch_width")
