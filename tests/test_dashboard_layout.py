"""Fast tier: the main tab's layout (issue #13, item 3; the browser checks the boxes).

Plots of fixed sizes flow in wrapping rows beside a sidebar that can be hidden; the
widest plot fits a 1024 px window beside the sidebar.
"""

import panel as pn

from app import layout
from app.trajectories import TITLES


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
    assert dash.controls.load_preset in dash.sidebar.select(pn.widgets.Button)
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
