"""Fast tier: the main tab's layout (issue #13, item 3; the browser checks the boxes).

Plots of fixed sizes flow in wrapping rows beside a sidebar that can be hidden; the
widest plot fits a 1024 px window beside the sidebar.
"""

import panel as pn

from app.mainview import layout
from app.mainview.trajectories import TITLES
from app.teaching.projector import PLOT_SIZE


def test_plots_wrap_beside_a_sidebar_that_can_be_hidden(dash):
    root = dash.__panel__()
    (flex,) = root.select(pn.FlexBox)
    assert flex.flex_wrap == "wrap"
    ts = dash.timeseries
    shown = [pane.object for pane in flex]
    for fig in (*dash.heatmaps.figures, dash.trajectories.fig, ts.fig_kl, ts.fig_kl_log,
                ts.fig_energy, ts.fig_rate, ts.fig_distance):
        assert fig in shown
        assert fig.width + layout.SIDEBAR_WIDTH + 60 <= 1024, fig.title.text
    assert dash.sidebar.visible
    assert dash.controls.apply_paste in dash.sidebar.select(pn.widgets.Button)
    dash.sidebar_toggle.value = False
    assert not dash.sidebar.visible
    dash.sidebar_toggle.value = True
    assert dash.sidebar.visible


def test_the_tokens_title_says_what_the_rings_are(dash):
    assert dash.trajectories.fig.title.text == TITLES[False]
    dash.compare = True
    assert dash.trajectories.fig.title.text == TITLES[True] and "rings" in TITLES[True]
    dash.compare = False
    assert dash.trajectories.fig.title.text == TITLES[False]


def test_two_plots_share_a_row_beside_the_sidebar_at_1024_px(dash):
    """The tokens and the time series shrink down to ``MIN_PLOT_WIDTH``: two of them (and
    a heatmap beside one) fit the ~714 px left beside the sidebar in a 1024 px window, so
    the main tab is not one long column there (it was: every plot on a row of its own);
    at large windows they keep their own width."""
    dash.__panel__()
    ts = dash.timeseries
    beside_sidebar = 1024 - layout.SIDEBAR_WIDTH - 10
    shrinking = {ts.fig_kl: layout.MIN_PLOT_WIDTH, ts.fig_kl_log: layout.MIN_PLOT_WIDTH,
                 ts.fig_energy: layout.MIN_PLOT_WIDTH, ts.fig_rate: layout.MIN_PLOT_WIDTH,
                 ts.fig_distance: layout.MIN_PLOT_WIDTH,
                 dash.trajectories.fig: layout.TOKENS_MIN_WIDTH}
    for fig, narrowest in shrinking.items():
        pane = dash.plot_panes[fig]
        assert fig.sizing_mode == pane.sizing_mode == "stretch_width", fig.title.text
        assert fig.min_width == narrowest and fig.max_width >= 430
        assert pane.max_width == fig.max_width
        assert pane.styles["flex"] == f"1 1 {narrowest}px"
    assert 2 * (layout.MIN_PLOT_WIDTH + 12) <= beside_sidebar
    heatmap = dash.heatmaps.figures[0].width + 12
    assert heatmap + layout.TOKENS_MIN_WIDTH + 12 <= beside_sidebar


def test_projector_mode_gives_shrinking_plots_its_size_and_gives_it_back(dash):
    dash.__panel__()
    fig = dash.timeseries.fig_energy
    pane = dash.plot_panes[fig]
    before = (fig.min_width, fig.max_width, pane.min_width, pane.max_width, dict(pane.styles))
    dash.projector = True
    width = fig.width
    assert width == PLOT_SIZE[0] != before[1] and fig.min_width == fig.max_width == width
    assert pane.styles["flex"] == f"0 0 {width}px"
    dash.projector = False
    assert (fig.min_width, fig.max_width, pane.min_width, pane.max_width,
            dict(pane.styles)) == before
