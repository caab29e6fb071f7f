"""The main tab's layout: a collapsible sidebar of controls beside plots that wrap.

Every plot keeps a fixed size and the plots flow in rows that wrap
(``pn.FlexBox``): at any window width from a projector's 1024 px up no plot is drawn
over another and nothing needs horizontal scrolling; the sidebar of controls can be
hidden (the button above the plots) to give them the whole width.
"""

from __future__ import annotations

import panel as pn

#: Width of the sidebar of controls (px).
SIDEBAR_WIDTH = 300
#: Narrowest width of a plot that shrinks (px): two of them, with their margins, fit
#: beside the sidebar in a 1024 px window (about 714 px are left for the plots).
MIN_PLOT_WIDTH = 330
#: Narrowest width of the tokens' plot (px): its long title and its toolbar fit above it.
TOKENS_MIN_WIDTH = 372
#: How far a plot that shrinks may also grow past its own width, so that the plots fill a
#: wide screen (1920 px) instead of leaving a blank band on the right.
MAX_GROWTH = 1.7


def flexible(fig, pane, min_width: int = MIN_PLOT_WIDTH) -> None:
    """Let ``fig`` (drawn in ``pane``) shrink from its width down to ``min_width`` so
    that two plots share a row of a narrow window (in one long column otherwise), and
    grow up to :data:`MAX_GROWTH` times its width to fill a wide one: a flex item of
    basis ``min_width`` (the pane passes its sizes on to the figure). The heatmaps keep
    their fixed size (square cells)."""
    pane.param.update(sizing_mode="stretch_width", min_width=min_width,
                      max_width=int(MAX_GROWTH * fig.width),
                      styles={"flex": f"1 1 {min_width}px"})


def plots(dashboard) -> pn.FlexBox:
    """The main tab's plots in wrapping rows: heatmaps, tokens, then the time series.

    Parameters
    ----------
    dashboard : app.dashboard.Dashboard

    Returns
    -------
    panel.FlexBox
        One ``pn.pane.Bokeh`` per figure (a hidden figure takes no room); they are also
        ``dashboard.plot_panes`` (figure → pane).
    """
    ts = dashboard.timeseries
    figures = (*dashboard.heatmaps.figures, dashboard.real_heads.model_fig,
               dashboard.trajectories.fig, *dashboard.clustering.figures,
               dashboard.real_heads.grid_fig,
               ts.fig_kl, ts.fig_kl_log, ts.fig_energy, ts.fig_rate, ts.fig_distance)
    dashboard.plot_panes = {f: pn.pane.Bokeh(f, margin=(4, 6)) for f in figures}
    for fig in (ts.fig_kl, ts.fig_kl_log, ts.fig_energy, ts.fig_rate, ts.fig_distance):
        flexible(fig, dashboard.plot_panes[fig])
    # the tokens' title and toolbar share a row above the plot: narrower, the toolbar
    # would stick out of the plot (and the page scroll sideways)
    tokens = dashboard.trajectories.fig
    flexible(tokens, dashboard.plot_panes[tokens], min_width=TOKENS_MIN_WIDTH)
    return pn.FlexBox(*dashboard.plot_panes.values(),
                      flex_wrap="wrap", align_items="flex-start",
                      sizing_mode="stretch_width")


def main_tab(dashboard, sidebar_items) -> pn.Row:
    """The main tab: the sidebar (``sidebar_items``), and the status, notices, plots and
    equations of ``dashboard``.

    Returns
    -------
    panel.Row
        Its sidebar is ``dashboard.sidebar``; the button hiding it ``dashboard.sidebar_toggle``.
    """
    sidebar = pn.Column(*sidebar_items, width=SIDEBAR_WIDTH, margin=(0, 4))
    toggle = pn.widgets.Toggle(label="☰ Controls", value=True, width=110, margin=(4, 10))
    toggle.param.watch(lambda event: setattr(sidebar, "visible", event.new), "value")
    dashboard.sidebar, dashboard.sidebar_toggle = sidebar, toggle
    explanation = pn.Column(dashboard.explanation, sizing_mode="stretch_width", max_width=900)
    dashboard.explanation_pane = explanation
    main = pn.Column(
        pn.Row(toggle, dashboard.status, sizing_mode="stretch_width"),
        dashboard.alert, dashboard.confinement, dashboard.caption, dashboard.zero_line,
        plots(dashboard),
        explanation,
        sizing_mode="stretch_width", min_width=320,
    )
    return pn.Row(sidebar, main, sizing_mode="stretch_width")


#: The main tab's plots by name: what a guided-tour step's ``"plots"`` may name (the
#: plots its text speaks of; :func:`named_figures`).
PLOT_NAMES = ("attention", "softmax", "lag_map", "model_attention", "tokens",
              "sphere_tokens", "similarity", "interaction_energy", "clusters",
              "kl", "energy", "rate", "distance")


def named_figures(dashboard, log_kl: bool | None = None) -> dict:
    """The main tab's figures by :data:`PLOT_NAMES` name. ``"kl"`` is the lag's plot
    shown: on the logarithmic axis if ``log_kl`` (default: the page's choice)."""
    ts, heat, clus = dashboard.timeseries, dashboard.heatmaps, dashboard.clustering
    log_kl = ts.log_kl if log_kl is None else log_kl
    return {"attention": heat.fig_attention, "softmax": heat.fig_softmax,
            "lag_map": heat.fig_ratio, "model_attention": dashboard.real_heads.model_fig,
            "tokens": dashboard.trajectories.fig, "sphere_tokens": clus.fig_tokens,
            "similarity": clus.fig_similarity, "interaction_energy": clus.fig_energy,
            "clusters": clus.fig_clusters, "kl": ts.fig_kl_log if log_kl else ts.fig_kl,
            "energy": ts.fig_energy, "rate": ts.fig_rate, "distance": ts.fig_distance}
