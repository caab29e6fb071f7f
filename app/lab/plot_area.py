"""Where the lab's plots go: the plots of the run shown, two a row; in projector mode only
the preset's own (its ``focus``: one row, taller, within 1280×720).

The plots not shown are not on the page at all (the rows are rebuilt, never hidden): a
Bokeh figure first drawn inside a hidden row kept an empty frame or empty axes once shown
(the base case's plots in a wrapping ``pn.FlexBox`` never got a frame at all).
"""

from __future__ import annotations

import panel as pn

#: The plots by name (the presets' ``focus`` names them), in the page's order.
MOMENTUM = ("gap", "path")
ATTENTION = ("eigenvalues", "cloud", "layers", "clouds", "hamiltonian", "softmax")
NAMES = MOMENTUM + ATTENTION
#: Height (px) of a figure, and of one in projector mode at scale 1 (its legend included;
#: under a tour step of four lines, within 720 px).
HEIGHT, PROJECTOR_HEIGHT = 300, 400
#: How much wider the legends' labels are in projector mode.
LEGEND_WIDTH = 1.6
#: The most plots a projector row shows.
PROJECTOR_PLOTS = 2


class PlotArea:
    """The lab's plots, laid out for the run shown.

    Parameters
    ----------
    figures : dict of str to bokeh figure
        Every plot of the lab by name (:data:`NAMES`).

    Attributes
    ----------
    column : panel.Column
        The rows of plots (placed on the page by the lab).
    shown : tuple of str
        The names of the plots on the page now, in order.
    """

    def __init__(self, figures: dict):
        self.figures = figures
        self.column = pn.Column(sizing_mode="stretch_width", margin=0)
        self.shown: tuple[str, ...] = ()
        self._key = None
        for fig in figures.values():  # a renderer's (invisible) box reached 15 px past a
            # plot at the right edge, and the page scrolled sideways at 1024 px
            fig.stylesheets = [*fig.stylesheets, ":host { overflow: clip; }"]
        #: Each legend's columns and label width as built (projector mode widens them).
        self._legends = {name: (fig.legend[0].ncols, fig.legend[0].label_width)
                         for name, fig in figures.items() if fig.legend}

    @staticmethod
    def order(momentum: bool, focus=(), projector: bool = False) -> tuple[str, ...]:
        """The plots to show: the run's own (:data:`MOMENTUM` or :data:`ATTENTION`, in
        that order, which the presets' and the tour's texts refer to: "bottom right"); in
        projector mode only those of ``focus`` (at most :data:`PROJECTOR_PLOTS`; the
        first two of the run without one)."""
        own = MOMENTUM if momentum else ATTENTION
        if projector:
            first = [n for n in focus if n in own]
            return tuple((first or list(own))[:PROJECTOR_PLOTS])
        return own

    def show(self, names, projector: bool = False, scale: float = 1.0) -> None:
        """Lay out the plots ``names`` (two a row; in projector mode one row, each figure
        :data:`PROJECTOR_HEIGHT` × ``scale`` high). The rows are rebuilt only when the
        plots or the mode change."""
        names = tuple(names)
        height = round(PROJECTOR_HEIGHT * scale) if projector else HEIGHT
        key = (names, height)
        if key == self._key:
            return
        self._key, self.shown = key, names
        for name, fig in self.figures.items():
            fig.height = height if name in names else HEIGHT
            # projector mode: no toolbar (it covered the large titles), legends in their
            # own columns with room for the large labels (15 px at least)
            fig.toolbar_location = None if projector else "right"
            if name in self._legends:
                ncols, width = self._legends[name]
                fig.legend[0].label_width = round(LEGEND_WIDTH * width) if projector else width
                if projector:
                    fig.legend[0].ncols = ncols
        per_row = len(names) if projector else 2
        rows = [pn.Row(*(pn.pane.Bokeh(self.figures[n], sizing_mode="stretch_width")
                         for n in names[i:i + per_row]), sizing_mode="stretch_width")
                for i in range(0, len(names), per_row)]
        self.column.objects = rows
