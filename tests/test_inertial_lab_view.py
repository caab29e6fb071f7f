"""The inertial lab's view (issue #13, item 7): it opens on a run, log axes span whole
decades (curves equal up to rounding look like one), marker labels neither overlap nor
leave the plot, legend colours are the curves', and the Part II equations are shown."""

import math

import pytest
from bokeh.models import FixedTicker

from app.lab.inertial_lab import InertialLab, load_presets
from app.lab.plotting import log_range
from app.teaching import theory
from dynamics import models


@pytest.fixture(scope="module")
def lab():
    return InertialLab()


def _log_figures(lab):
    if lab.momentum:
        return (lab.momentum_plots.gap_fig,)
    plots = lab.attention_plots
    return (plots.eig_fig, plots.clouds_fig, plots.layer_fig, plots.soft_fig)


def test_the_lab_opens_on_its_first_preset_run(lab):
    """The first preset is the base case, momentum on a quadratic (issue #29): its two
    plots in place of the attention plots, and a status line of its runs."""
    presets, _ = load_presets()
    assert lab.preset == presets[0]["name"] == "Momentum on a quadratic"
    assert lab.momentum and lab.plot_area.shown == ("gap", "path")
    assert lab.shown_figures() == list(lab.momentum_plots.figures)
    assert all(len(src.data["t"]) == 1000 for src in lab.momentum_plots.gap_src.values())
    assert "f − f* at t = 100" in lab.status.object and presets[0]["name"] in lab.caption.object


def test_the_base_case_plots_show_its_runs_and_switch_with_the_presets(lab):
    from dynamics.inertial.momentum import run_momentum_experiment

    presets, _ = load_presets()
    lab.preset = presets[0]["name"]
    r = run_momentum_experiment(presets[0]["settings"])
    runs = lab.momentum_plots
    assert runs.gap_fig.x_scale.__class__.__name__ == "LogScale"
    assert runs.gap_fig.y_scale.__class__.__name__ == "LogScale"
    labels = [item.label.value for item in runs.gap_fig.legend[0].items]
    assert labels == [run.label for run in r.runs.values()] + ["(r−1)²|x₀|²/(2t²)"]
    nesterov = r.runs["nesterov"]
    assert list(runs.gap_src["nesterov"].data["f"]) == list(nesterov.gap_curve().y)
    assert list(runs.path_src["nesterov"].data["x"]) == list(nesterov.path().x)
    assert list(runs.bound_src.data["f"]) == list(r.bound.y)
    assert (runs.gap_fig.x_range.start, runs.gap_fig.x_range.end) == (0.1, 100.0)
    # the settings the base case does not read are not shown (nor their group)
    assert not lab.value_input.visible and not lab.controls["theta"].visible
    lab.preset = presets[1]["name"]  # an attention preset: its six plots
    assert not lab.momentum and lab.shown_figures() == list(lab.attention_plots.figures)
    assert lab.value_input.visible and lab.controls["theta"].visible
    # the heavy ball at the critical damping is drawn once
    lab.preset = presets[0]["name"]
    lab.settings.alpha = 0.2
    lab.run()
    assert not runs.gap_lines["heavy_ball"].visible and runs.gap_lines["critical"].visible
    assert not runs.gap_fig.legend[0].items[1].visible
    lab.preset = None
    lab.preset = presets[0]["name"]
    assert runs.gap_lines["heavy_ball"].visible


def test_nesterov_t0_zero_outside_the_base_case_is_refused_by_name(lab):
    presets, _ = load_presets()
    lab.preset = presets[1]["name"]
    before = lab.status.object
    lab.settings.param.update(damping="nesterov", nesterov_t0=0.0)
    assert not lab.run()
    assert lab.message.visible and "nesterov_t0" in lab.message.object
    assert lab.status.object == before
    lab.settings.nesterov_t0 = 1.0


def test_log_range_spans_whole_decades():
    assert log_range([[1 - 2e-16, 1.0, 1 + 2e-16]]) == (0.1, 10.0)
    assert log_range([[0.5, 99999999.5]]) == (0.1, 1e9)
    assert log_range([[0.3, 0.9]], extra=(10.0,)) == (0.1, 100.0)
    assert log_range([[]]) == (0.1, 10.0) and log_range([[0.0, -1.0, math.inf]]) == (0.1, 10.0)


def test_every_preset_draws_its_curves_inside_decade_axes(lab):
    presets, _ = load_presets()
    for p in presets:
        lab.preset = p["name"]
        for fig in _log_figures(lab):
            start, end = fig.y_range.start, fig.y_range.end
            lo, hi = math.log10(start), math.log10(end)
            assert lo == round(lo) and hi == round(hi) and hi - lo >= 1, (p["name"], fig)
            ticker = fig.yaxis[0].ticker
            assert isinstance(ticker, FixedTicker) and len(ticker.ticks) >= 2
            assert all(math.log10(t) == round(math.log10(t)) for t in ticker.ticks)
            for r in fig.renderers:
                data = r.data_source.data
                ys = data.get("ys") or [data.get("s", data.get("f", []))]
                for y in ys:
                    y = [v for v in y if math.isfinite(v) and v > 0]
                    assert not y or (start <= min(y) and max(y) <= end), (p["name"], fig)
        if p["name"].startswith("V"):  # no blow-up: shown to t = 10, where the eigenvalue
            # of v = −1 has decayed below 0.1 and the other stays 1 ± 1e-16: 0.01 … 10
            y_range = lab.attention_plots.eig_fig.y_range
            assert (y_range.start, y_range.end) == (0.01, 10.0)
            assert max(max(xs) for xs in lab.attention_plots.eig_first.data["xs"]) == 10.0


def test_marker_labels_have_rows_of_their_own_and_stay_in_the_plot(lab):
    presets, _ = load_presets()
    lab.preset = next(p["name"] for p in presets if p["name"].startswith("effective"))
    plots = lab.attention_plots
    for pair, curves in (((plots.tmax_marker, plots.tacc_marker), plots.eig_first.data["xs"]
                          + plots.eig_acc.data["xs"]),
                         ((plots.pred_marker, plots.actual_marker),
                          [src.data["l"] for src in plots.layer_src.values()])):
        (_, a), (_, b) = pair
        assert a.visible and b.visible
        for label in (a, b):  # at the top of the frame, clear of the points before a
            assert (label.y.target, label.y.symbol, label.text_baseline) == (  # blow-up
                "frame", "top", "top")
        assert abs(a.y.offset - b.y.offset) >= 16  # one row each (10 pt text)
        x_end = max(max(x) for x in curves if len(x))
        for span, label in pair:
            right = label.x > 0.5 * x_end
            assert label.text_align == ("right" if right else "left"), label.text
            assert label.text_color == span.line_color
    assert plots.tacc_marker[1].text_align == "right"  # the blow-up ends the curves


def test_eigenvalue_legend_colours_are_the_curves(lab):
    plots = lab.attention_plots
    items = plots.eig_fig.legend[0].items
    colours = []
    for item in items:
        (renderer,) = item.renderers
        colour = renderer.glyph.line_color
        assert isinstance(colour, str) and colour.startswith("#")  # one colour, no field
        colours.append(colour)
    assert len(set(colours)) == len(items) == 2
    assert [plots.tmax_marker[0].line_color, plots.tacc_marker[0].line_color] == colours


def test_the_part_two_equations_and_theory_links_are_shown(lab):
    text = lab.explanation.object
    anchors = theory.anchors(theory.page_html())
    for spec in models.specs(part=2):
        assert spec.equations in text and f'href="#{spec.section}"' in text
        assert spec.section in anchors
    assert 'href="#part-2"' in text and "part-2" in anchors
