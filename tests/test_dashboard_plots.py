"""Fast tier: what the time series show (issue #13, item 6).

Quantities a model's spec declares ≡ 0 are said to be so, not drawn as rounding noise;
the potential's line is not listed twice; legends are below the plots (they covered the
curves early in a run); after Reset the axes read a time unit, not ±1e−10.
"""

import pytest
from dashboard_support import play

from app import Dashboard
from dynamics import Settings


def test_after_reset_the_axes_are_readable(dash):
    play(dash, 20)
    dash.reset()
    ts = dash.timeseries
    assert list(ts.source.data["t"]) == [0.0]
    for fig in (ts.fig_kl_log, ts.fig_energy, ts.fig_rate):
        x = fig.x_range
        assert x.start <= 0 < 1 <= x.end < 2, (fig.title.text, x.start, x.end)
    y = ts.fig_energy.y_range  # every energy line is 0 at t = 0
    assert y.end - y.start >= 1
    # ... and drawn from there: the zero residual line started late (issue #13, item 6)
    for key in ("d_energy", "budget", "dissipated", "residual"):
        assert list(ts.source.data[key]) == [0.0], key


@pytest.mark.parametrize("model", ["reduced", "transformer"])
def test_quantities_zero_by_construction_are_said_to_be(model):
    """Issue #35, item 10: a plot none of whose lines the model has (lag map, KL, D) is
    not shown, its room left to the plots with data; one line says what is ≡ 0 and why."""
    d = Dashboard(settings=Settings(model=model, n_tokens=5, dim=3), playing=False)
    d.__panel__()
    play(d, 10)
    ts = d.timeseries
    for fig in (ts.fig_kl, ts.fig_kl_log, ts.fig_rate, d.heatmaps.fig_ratio):
        assert not fig.visible, fig.title.text
    assert ts.empty == {ts.fig_kl, ts.fig_kl_log, ts.fig_rate}
    assert ts.fig_energy.visible and d.heatmaps.fig_attention.visible
    assert d.zero_line.visible
    line = d.zero_line.object
    for said in ("≡ 0", "KL(A‖A\\*)", "log(A/A\\*)", "dissipation D", "softmax"):
        assert said in line, (said, line)
    labels = [item.label.value for item in ts.fig_energy.legend[0].items if item.visible]
    assert len(labels) == len(set(labels))  # Φ(t) − Φ(0) once for the transformer
    assert "dissipated ∫D dt ≡ 0" in labels
    d.settings.model = "canonical"
    for fig in (ts.fig_kl_log, ts.fig_rate, d.heatmaps.fig_ratio):
        assert fig.visible, fig.title.text
    assert ts.lines["kl_log"].visible and not ts.fig_kl.visible  # (the log axis chosen)
    assert not d.zero_line.visible and ts.empty == set()
    d.timeseries.log_kl = False
    assert ts.fig_kl.visible and not ts.fig_kl_log.visible


def test_legends_are_below_the_plots(dash):
    ts = dash.timeseries
    for fig in ts.figures:
        (legend,) = fig.legend
        assert legend in fig.below and legend not in fig.center
