"""Fast tier: what a class reads on the main tab (issue #35, items 9 and 12): colour bars
and log axes with readable ticks, the model attention's gap in plain digits, the word
under the mouse, a slider's real value for screen readers, and URL refusals that agree.
The pixels are checked in ``tests/ui/test_projector_browser.py``."""

import math
import re

import pytest
from bokeh.document import Document
from bokeh.models import CustomJSHover, HoverTool, Legend, Range1d
from dashboard_support import play

from app.dashboard import Dashboard
from app.lab.attention_plots import AttentionPlots
from app.lab.momentum_plots import MomentumPlots
from app.mainview.heatmaps import SCALES, scale_limits
from app.mainview.ranges import SteppedRange
from app.mainview.slider_aria import LOG_SLIDER_CLASS
from app.serving import urlstate


def _preset(dash, name):
    return next(p for p in dash.presets if p["name"] == name)


@pytest.mark.parametrize("n", [8, 32, 100])
def test_a_uniform_map_gets_a_colour_scale_of_few_digits(n):
    """A = A* = 1/N everywhere (tokens gathered on the sphere): the scale spanned 1e-9
    and its bar was labelled "0.0312500004"; it spans at least a quarter of 1/N."""
    lo = hi = 1.0 / n
    low, high = scale_limits(SCALES[1], 0.0, 1.0, lo, hi + 1e-9)
    assert low <= lo and hi <= high
    assert high - low >= hi / 4
    # ticks a fifth of the span apart need at most four significant digits
    step = (high - low) / 5
    assert -math.floor(math.log10(step)) - math.floor(-math.log10(hi)) <= 4


@pytest.mark.parametrize("lo, hi", [(3.0, 7.0), (1e-3, 5e-3), (2.0, 2.0)])
def test_a_log_axis_spans_two_decades_at_least(lo, hi):
    """Under two decades the page's log ticker falls back to linear ticks ("3 4 5 6 7"
    crowded at the top of the lag's axis on the value-matching step)."""
    rng = Range1d(1e-3, 1.0)
    SteppedRange(rng, log=True).fit(lo, hi)
    assert rng.start <= lo and hi <= rng.end
    assert math.log10(rng.end / rng.start) >= 2


def test_the_value_matching_steps_lag_axis_has_decades():
    d = Dashboard(playing=False)
    d.load_preset(_preset(d, "Energy-dissipation law: value matching"))
    play(d, 30)
    y = d.timeseries.fig_kl_log.y_range
    assert math.log10(y.end / y.start) >= 2


def test_the_model_attention_title_gives_its_gap_in_plain_digits():
    """ "max diff 7e-01" was cut to "max diff 7e-" at the plot's width."""
    d = Dashboard(playing=False)
    d.load_preset(_preset(d, "A real head relaxing"))
    d.settings.beta = 2.0
    title = d.real_heads.model_fig.title.text
    gap = title.rsplit("max diff ", 1)[1]
    assert float(gap) > 1e-3 and "e" not in gap, title
    assert len(title.splitlines()[-1]) <= 40 and d.real_heads.model_fig.title.text_font_size


def test_heatmap_hover_reads_the_words_of_the_axes():
    """The tooltip's i and j go through the axes' labels (a word where words label
    them: "6 (it)", not "i: 6")."""
    d = Dashboard(playing=False)
    for fig in d.heatmaps.figures:
        hover = fig.select_one(HoverTool)
        assert dict(hover.tooltips)["i"] == "$y{custom}"
        assert dict(hover.tooltips)["j"] == "$x{custom}"
        fy, fx = hover.formatters["$y"], hover.formatters["$x"]
        assert isinstance(fy, CustomJSHover) and fy.args["axis"] is fig.yaxis[0]
        assert isinstance(fx, CustomJSHover) and fx.args["axis"] is fig.xaxis[0]
        assert "major_label_overrides" in fy.code


def test_log_sliders_are_marked_for_their_real_value():
    d = Dashboard(playing=False)
    d.__panel__()
    for name in ("beta", "gamma"):
        assert LOG_SLIDER_CLASS in d.controls.widgets[name].css_classes
    assert any(type(o).__name__ == "RealValueAria" for o in d.sidebar.select())


@pytest.mark.parametrize("asked", ["300", "2000", "1", "1024"])
def test_a_refused_n_tokens_names_the_one_range_a_url_accepts(asked):
    """300 was refused as "above 256 not accepted" and 2000 as "[2, 1024]"."""
    d = Dashboard(query={"n_tokens": asked}, playing=False)
    assert d.settings.n_tokens == 8
    ranges = re.findall(r"\[(\d+), (\d+)\]", d.notice)
    assert ranges == [("2", str(urlstate.MAX_URL_TOKENS))], d.notice
    assert "above" not in d.notice
    assert "n_tokens" not in d.query  # (the URL is written from it once the page loads)


def test_every_legend_sits_below_its_plot_where_it_covers_no_curve(dash):
    """A legend inside the frame hides the data under it: the interaction energy's, in
    the lower right, covered the end of the plateau that the metastable-clusters step of
    the tour is about. Every plot of the main tab and of the lab puts it below."""
    root = dash.__panel__().get_root(Document())
    figures = [m for m in root.references() if hasattr(m, "below") and m.select(Legend)]
    figures += [f for plots in (AttentionPlots(), MomentumPlots()) for f in plots.figures]
    assert len(figures) >= 10
    for fig in figures:
        for legend in fig.select({"type": Legend}):
            assert legend in fig.below, (fig.title.text, legend.location)
