"""Projector mode: one switch for a lecture hall (large type, four plots, strong lines,
everything within 1280×720 without scrolling).

On: the sidebar, the equations, the caption, the notices and the page title are hidden
(a tour step's text stays); the main tab
keeps four plots (A(t), the tokens, the lag on its log axis and the energy balance) in two
rows, each :data:`PLOT_SIZE`; every axis label and tick label is :data:`FONT` or larger;
lines are drawn :data:`LINE_SCALE` times thicker, in black text. Off: everything as before
(each change is recorded and undone).
"""

from __future__ import annotations

import param

#: Text sizes in projector mode (axis labels ≥ 18 px).
FONT, TITLE_FONT, LEGEND_FONT = "18px", "20px", "15px"
#: Width and height of each of the four plots (px): two rows fit 1280×720.
PLOT_SIZE = (600, 240)
#: Lines are this many times thicker.
LINE_SCALE = 1.75


def _text_props(fig) -> dict:
    props = {}
    for axis in (*fig.xaxis, *fig.yaxis):
        props[axis] = {"axis_label_text_font_size": FONT,
                       "major_label_text_font_size": FONT,
                       "axis_label_text_color": "black", "major_label_text_color": "black"}
    props[fig.title] = {"text_font_size": TITLE_FONT, "text_color": "black"}
    if fig.legend:  # legends in rows (below the plots): three columns, two rows at most
        legend = fig.legend[0]
        props[legend] = {"label_text_font_size": LEGEND_FONT}
        if isinstance(legend.ncols, int):
            props[legend]["ncols"] = max(3, legend.ncols)
    for renderer in fig.renderers:
        glyph = renderer.glyph
        if hasattr(glyph, "line_width") and isinstance(glyph.line_width, (int, float)):
            props[glyph] = {"line_width": glyph.line_width * LINE_SCALE}
    return props


def _update(obj, values: dict) -> None:
    """Set ``values`` on a Panel object or a Bokeh model."""
    if isinstance(obj, param.Parameterized):
        obj.param.update(**values)
    else:
        obj.update(**values)


class Projector:
    """Turns projector mode on and off for ``dashboard`` (its layout built)."""

    def __init__(self, dashboard):
        self.dashboard = dashboard
        self._saved: list[tuple[object, dict]] = []  # (model, its old values)

    def _set(self, obj, **values) -> None:
        self._saved.append((obj, {k: getattr(obj, k) for k in values}))
        _update(obj, values)

    def shown_figures(self):
        """The four plots of the main tab kept in projector mode: the clustering view's
        on the sphere, otherwise A(t), the tokens, the lag and the energy balance."""
        d = self.dashboard
        if d.clustering.mode == "on_sphere":
            return d.clustering.figures[:4]
        return (d.heatmaps.fig_attention, d.trajectories.fig, d.timeseries.fig_kl_log,
                d.timeseries.fig_energy)

    def apply(self, on: bool) -> None:
        """Projector mode on or off."""
        if not on:
            for obj, values in reversed(self._saved):
                _update(obj, values)
            self._saved = []
            return
        if self._saved:
            return
        d = self.dashboard
        kept = self.shown_figures()
        for fig in d.plot_panes:
            if fig not in kept and fig.visible:
                self._set(fig, visible=False)
        for fig in kept:
            width, height = PLOT_SIZE
            self._set(fig, width=width, height=height)
            if fig.sizing_mode == "stretch_width":  # one that shrinks (app.layout.flexible)
                self._set(d.plot_panes[fig], min_width=width, max_width=width,
                          styles={"flex": f"0 0 {width}px"})
            for obj, values in _text_props(fig).items():
                self._set(obj, **values)
        lab = d.lab
        if lab is not None:
            for fig in lab.figures:
                for obj, values in _text_props(fig).items():
                    self._set(obj, **values)
        if d.sidebar_toggle.value:
            self._set(d.sidebar_toggle, value=False)
        for pane in (d.explanation_pane, d.title, d.alert, d.confinement, d.links,
                     d.caption):
            if pane.visible:
                self._set(pane, visible=False)
        if d.timeseries.log_kl is False:
            self._set(d.timeseries, log_kl=True)
