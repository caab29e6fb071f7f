"""Fast tier: the main tab's layout (issue #13, item 3; the browser checks the boxes).

Plots of fixed sizes flow in wrapping rows beside a sidebar that can be hidden; the
widest plot fits a 1024 px window beside the sidebar.
"""

import panel as pn

from app.dashboard import Dashboard
from app.mainview import layout
from app.mainview.trajectories import TITLES
from app.teaching.projector import DRAWER_STYLES, FONT, PLOT_SIZE, SERIES_TICKS


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


def _preset(dash, name):
    return next(p for p in dash.presets if p["name"] == name)


def test_projector_mode_shows_a_sentences_words_on_two_large_heatmaps():
    """Issue #35, item 6: where words label the heatmaps (a real head's sentence) A and A*
    are the only plots kept, each large enough that every word's row and column has at
    least the labels' height (they overlapped on 110 px maps)."""
    dash = Dashboard(playing=False)
    dash.__panel__()
    dash.load_preset(_preset(dash, "A real head relaxing"))
    dash.projector = True
    shown = [f for f in dash.plot_panes if f.visible]
    assert shown == [dash.heatmaps.fig_attention, dash.heatmaps.fig_softmax]
    n = len(dash.heatmaps.fig_attention.xaxis[0].major_label_overrides)
    assert n >= 12
    label = int(FONT.removesuffix("px"))
    for fig in shown:
        # the frame: the figure less its word axis (~120 px), colour bar and title
        assert fig.width - 190 >= n * label and fig.height - 150 >= n * label, fig.width
        assert fig.xaxis[0].major_label_text_font_size == FONT
    dash.projector = False
    assert dash.trajectories.fig.visible and dash.timeseries.fig_energy.visible
    # a seeded run keeps the five plots
    dash.load_preset(_preset(dash, "Energy-dissipation law: canonical"))
    dash.projector = True
    assert len([f for f in dash.plot_panes if f.visible]) == 5


def test_projector_mode_off_gives_the_sidebar_its_place_back(dash):
    """Issue #35, item 6: the page never removes a style it is not sent, so every style
    the drawer added is given back as "" (removed): the controls return beside the plots,
    not fixed over them."""
    dash.__panel__()
    before = dict(dash.sidebar.styles)
    dash.projector = True
    assert not dash.sidebar.visible
    dash.sidebar_toggle.value = True  # the drawer opened
    dash.projector = False
    assert dash.sidebar.visible and dash.sidebar_toggle.value
    for key in DRAWER_STYLES:
        assert dash.sidebar.styles.get(key, "") == before.get(key, ""), key
    pane = dash.plot_panes[dash.heatmaps.fig_attention]
    assert pane.styles.get("flex", "") == ""


def test_projector_mode_draws_the_sphere_round_and_series_with_few_ticks():
    """Issue #35, item 6: the unit circle's frame is square (it was 612 × 222, squashed and
    cut); the time series ask for at most SERIES_TICKS ticks (large labels overlapped)."""
    dash = Dashboard(playing=False)
    dash.__panel__()
    sphere = dash.clustering.fig_tokens
    assert sphere.frame_width == sphere.frame_height
    dash.load_preset(_preset(dash, "Clustering on the sphere"))
    dash.projector = True
    assert sphere.visible and sphere.frame_width == sphere.frame_height
    assert sphere.width > sphere.frame_width  # room for its axis
    for fig in (dash.clustering.fig_energy, dash.clustering.fig_clusters):
        assert fig.yaxis[0].ticker.desired_num_ticks <= SERIES_TICKS
    dash.projector = False
    dash.load_preset(_preset(dash, "Energy-dissipation law: canonical"))
    dash.projector = True
    for fig in (dash.timeseries.fig_energy, dash.timeseries.fig_kl_log):
        for axis in (*fig.yaxis, *fig.xaxis):
            if axis is dash.timeseries.fig_kl_log.yaxis[0]:  # its own ticker: ≤ 4 decades
                assert f"/ {SERIES_TICKS})" in axis.ticker.major_code
                continue
            assert axis.ticker.desired_num_ticks <= SERIES_TICKS, fig.title.text
