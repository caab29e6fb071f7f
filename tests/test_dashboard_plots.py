"""Fast tier: what the time series show (issue #13, item 6).

Quantities a model's spec declares ≡ 0 are said to be so, not drawn as rounding noise;
the potential's line is not listed twice; legends are below the plots (they covered the
curves early in a run); after Reset the axes read a time unit, not ±1e−10.
"""

import pytest
from dashboard_support import play

from app import Dashboard
from app.mainview.timeseries import ZERO_NOTE
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
    d = Dashboard(settings=Settings(model=model, n_tokens=5, dim=3), playing=False)
    play(d, 10)
    ts = d.timeseries
    for fig in (ts.fig_kl, ts.fig_kl_log, ts.fig_rate):
        assert ts.zero_notes[fig].visible and ts.zero_notes[fig].text == ZERO_NOTE
        assert not any(ts.lines[k].visible for k in ts.figure_columns[fig])
        # a plain axis, not one fitted to rounding errors of 1e−16
        assert fig.y_range.end - fig.y_range.start >= 0.9
    assert not ts.zero_notes[ts.fig_energy].visible
    labels = [item.label.value for item in ts.fig_energy.legend[0].items if item.visible]
    assert len(labels) == len(set(labels))  # Φ(t) − Φ(0) once for the transformer
    assert "dissipated ∫D dt ≡ 0 for this model" in labels
    assert d.heatmaps.fig_ratio.title.text.endswith(ZERO_NOTE)
    d.settings.model = "canonical"
    assert not ts.zero_notes[ts.fig_kl_log].visible and ts.lines["kl_log"].visible
    assert not d.heatmaps.fig_ratio.title.text.endswith(ZERO_NOTE)


def test_legends_are_below_the_plots(dash):
    ts = dash.timeseries
    for fig in ts.figures:
        (legend,) = fig.legend
        assert legend in fig.below and legend not in fig.center
