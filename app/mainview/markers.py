"""The markers of mid-run setting changes on the time series (Theory page: tracking the
moving softmax, a quench): their labels ("β 1 → 4"), how the changes of one slider drag
and changes whose labels would overlap merge into one marker, and :class:`ChangeMarkers`,
which draws them on the energy and KL plots.
"""

from __future__ import annotations

import math

from bokeh.models import ColumnDataSource, LabelSet

#: Symbols of the settings in the markers of mid-run changes.
SYMBOLS = {"beta": "β", "gamma": "γ", "mass": "m", "kappa": "κ", "confinement": "k",
           "logit_noise": "σ"}
#: Characters of a change marker's label (10 pt) across a time plot's frame: labels whose
#: lines are closer than their length's share of the time shown would overlap.
LABEL_CHARS = 55
#: Most values a merged marker's label lists per setting (first, turning points, last).
MOST_VALUES = 4


def change_label(values) -> str:
    """"β 1 → 4" for the ``{name: (old, new)}`` of a change (one part per setting)."""
    return ", ".join(f"{SYMBOLS.get(k, k)} {old:g} → {new:g}"
                     for k, (old, new) in values.items())


def coalesce(changes, gap: float) -> list[tuple[float, float, str]]:
    """The markers of ``changes``: ``(t_first, t_last, label)`` each.

    A change of the same settings as the marker before it, at most ``gap`` later, joins
    that marker (one drag of a slider makes many small changes): its label then reads
    from the first old value to the last new one, e.g. "β 1 → 4".
    """
    marks = []  # [t_first, t_last, {name: [old, new]}]
    for change in changes:
        last = marks[-1] if marks else None
        if (last is not None and last[2].keys() == change.values.keys()
                and change.t - last[1] <= gap):
            last[1] = change.t
            for name, (_, new) in change.values.items():
                last[2][name][1] = new
        else:
            marks.append([change.t, change.t,
                          {k: [old, new] for k, (old, new) in change.values.items()}])
    return [(t0, t1, change_label(values))
            for t0, t1, values in marks]


def merge_gap(times) -> float:
    """The largest time between two changes of one slider drag (:func:`coalesce`): three
    frames of ``times`` (a slider sends a value about every frame while it is dragged);
    inf before a second frame (the changes of a run's first frame).

    Not a share of the time shown: that grew with the run, so a quench and its reversal
    a few time units apart became one marker "β 1 → 1" once the run was long, and
    markers already drawn merged when a later change came.
    """
    if len(times) < 2:
        return math.inf
    return 3.0 * (times[-1] - times[-2])


def _path(values) -> list[float]:
    """``values`` without repeats and with only their turning points between the first
    and the last (a drag 1, 1.5, 2, 3 is "1 → 3"; a quench and its reversal 1 → 5 → 1)."""
    v = [x for i, x in enumerate(values) if i == 0 or x != values[i - 1]]
    path = [v[0]] + [v[i] for i in range(1, len(v) - 1)
                     if (v[i] - v[i - 1]) * (v[i + 1] - v[i]) < 0] + v[-1:] * (len(v) > 1)
    if len(path) > MOST_VALUES:
        path = [*path[:MOST_VALUES - 2], math.nan, path[-1]]
    return path


def mark_label(values: dict) -> str:
    """"β 1 → 5 → 1, γ 1 → 2" for ``{name: [values in order]}`` (… for values left out)."""
    return ", ".join(
        f"{SYMBOLS.get(k, k)} " + " → ".join("…" if math.isnan(x) else f"{x:g}"
                                            for x in _path(v))
        for k, v in values.items())


def change_marks(changes, gap: float, span: float) -> list[tuple[float, float, str]]:
    """The change markers of ``changes``: ``(t_first, t_last, label)`` each.

    A change joins the marker before it when it is one slider drag with it (the same
    settings, at most ``gap`` later: :func:`coalesce`). Then a marker joins the one
    before it while its label would overlap that marker's: its line closer to the
    marker's than its label's share (:data:`LABEL_CHARS`) of the time shown, ``span``.
    Overlap is judged on the labels as drawn, after every change has joined its marker
    (a label grows as a drag goes on), so no two labels drawn cross. Dragging β used to
    pile up labels one over the other; one label now reads from the first value over
    the turning points to the last ("β 1 → 5 → 1"), a band covering the changes.
    """
    marks = []  # [t_first, t_last, {name: [values in order]}]
    for change in changes:
        last = marks[-1] if marks else None
        if (last is not None and last[2].keys() == change.values.keys()
                and change.t - last[1] <= gap):
            _join(last, change.t, change.values)
        else:
            marks.append([change.t, change.t,
                          {k: [old, new] for k, (old, new) in change.values.items()}])
    merged = True
    while merged:  # a join lengthens a label, which may then overlap the one before
        merged = False
        for i in range(len(marks) - 1, 0, -1):
            before, mark = marks[i - 1], marks[i]
            if mark[0] - before[0] < span * len(mark_label(mark[2])) / LABEL_CHARS:
                for name, values in mark[2].items():
                    before[2].setdefault(name, []).extend(values)
                before[1] = mark[1]
                del marks[i]
                merged = True
    return [(t0, t1, mark_label(values)) for t0, t1, values in marks]


def _join(mark, t: float, values: dict) -> None:
    """Change ``values`` (``{name: (old, new)}``) at ``t`` joins ``mark``."""
    mark[1] = t
    for name, (old, new) in values.items():
        mark[2].setdefault(name, [old]).append(new)


def _no_marks() -> dict:
    return {"t0": [], "t1": [], "text": []}


class ChangeMarkers:
    """The change markers drawn on ``figures``: a line where a marker's changes began, a
    light band over the time they lasted and its label, each a row of one source
    (:attr:`source`) drawn by one renderer per plot, so a new change costs one small data
    update, not new models on the page."""

    def __init__(self, figures):
        self.source = ColumnDataSource(_no_marks())
        self._hidden = ColumnDataSource(_no_marks())  # what a hidden plot draws
        self._shown = 0  # (changes, time span) of the markers drawn
        self._views = {}  # per figure: its band and line renderers and its labels
        for fig in figures:
            band = fig.vstrip(x0="t0", x1="t1", source=self.source, fill_color="#888",
                              fill_alpha=0.15, line_alpha=0.0, level="overlay")
            line = fig.vspan(x="t0", source=self.source, line_color="#666",
                             line_dash="dashed", line_width=1.5, level="overlay")
            # left of the line: a change is made at the right end of the plot
            labels = LabelSet(
                x="t0", y=8, y_units="screen", x_offset=-4, text="text",
                source=self.source, text_align="right", text_font_size="12pt",
                text_color="#222", background_fill_color="white", background_fill_alpha=0.85,
                level="overlay")
            fig.add_layout(labels)
            self._views[fig] = (band, line, labels)

    def show(self, fig, visible: bool) -> None:
        """Draw the markers on ``fig`` (if it has them), or nothing while it is hidden."""
        if fig in self._views:
            band, line, labels = self._views[fig]
            markers = self.source if visible else self._hidden
            band.data_source = line.data_source = labels.source = markers

    def mark(self, changes, times, span: float) -> None:
        """Markers for ``changes`` on plots of rows at ``times`` that show ``span`` time
        units (:func:`change_marks`; nothing is redrawn when neither changed)."""
        if (len(changes), span) == self._shown:
            return
        self._shown = (len(changes), span)  # labels merge by the time shown
        marks = change_marks(changes, merge_gap(times), span)
        self.source.data = {
            "t0": [m[0] for m in marks], "t1": [m[1] for m in marks],
            "text": [m[2] for m in marks]}

    def clear(self) -> None:
        """No markers (a new run)."""
        self.source.data = _no_marks()
        self._shown = 0

    @property
    def markers(self) -> list[tuple[float, float, str]]:
        """The markers shown: ``(t_first, t_last, label)`` each."""
        d = self.source.data
        return list(zip(d["t0"], d["t1"], d["text"], strict=True))
