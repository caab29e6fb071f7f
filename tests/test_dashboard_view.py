"""Fast tier: the smaller items of issue #13 (item 8), through the Viewer's parameters.

Checkboxes toggled by their label; no stale frame rate while paused; the run waits
while another tab is shown; automatic and logarithmic colour scales for A and A*;
downloads named after model and time, the CSV carrying its settings.
"""

import io
import json
import re
import types

import pandas as pd
import panel as pn
import pytest
from bokeh.models import ColorBar, LinearColorMapper, LogColorMapper
from dashboard_support import play

from app import Dashboard
from app.mainview import export
from app.mainview.heatmaps import SCALES, scale_limits
from dynamics import Settings


def test_checkboxes_are_label_groups_synced_with_their_parameter(dash):
    box = dash.controls.compare
    assert isinstance(box, pn.widgets.CheckBoxGroup) and box.value == []
    box.value = list(box.options)  # a click on the box or on its label
    assert dash.compare and dash.reference is not None
    dash.compare = False
    assert box.value == []
    root = dash.__panel__()
    (log_kl,) = [w for w in root.select(pn.widgets.CheckBoxGroup)
                 if w.options == ["Logarithmic KL axis"]]
    log_kl.value = []
    assert not dash.timeseries.log_kl and dash.timeseries.fig_kl.visible


def test_no_frame_rate_is_shown_while_paused(dash):
    dash.playing = True
    play(dash, 5)
    dash.update_status(force=True)
    assert "frames/s" in dash.status.object and "▶ playing" in dash.status.object
    dash.playing = False
    assert "frames/s" not in dash.status.object and "ms/tick" not in dash.status.object
    assert "❚❚ paused" in dash.status.object and "t = " in dash.status.object


class _Callback:
    """Stands for the session's periodic callback."""

    def __init__(self, running):
        self.running = running

    def start(self):
        self.running = True

    def stop(self):
        self.running = False


def test_the_run_waits_while_another_tab_is_shown(dash):
    dash.__panel__()
    dash.playing = True
    dash.periodic_callback = _Callback(running=True)
    dash.tabs.active = 1  # the inertial lab
    assert not dash.periodic_callback.running and dash.playing
    assert "another tab" in dash.status.object
    dash.tabs.active = 2
    assert not dash.periodic_callback.running
    dash.tabs.active = 0
    assert dash.periodic_callback.running
    dash.playing = False
    dash.tabs.active = 1
    dash.tabs.active = 0
    assert not dash.periodic_callback.running  # paused stays paused


def _bar(fig):
    return next(r for r in fig.right if isinstance(r, ColorBar))


def test_colour_scales_of_a_and_a_star():
    d = Dashboard(settings=Settings(n_tokens=64, dim=3), playing=False)
    play(d, 2)
    h = d.heatmaps
    largest = max(h.attention.data["image"][0].max(), h.softmax.data["image"][0].max())
    assert largest < 0.5  # on the fixed scale the maps would be uniformly dark
    smallest = min(h.attention.data["image"][0].min(), h.softmax.data["image"][0].min())
    h.color_scale = SCALES[2]  # logarithmic (automatic is the default: issue #27)
    h.color_scale = SCALES[1]  # automatic
    for fig in (h.fig_attention, h.fig_softmax):
        mapper = fig.renderers[0].glyph.color_mapper
        assert isinstance(mapper, LinearColorMapper) and 0 <= mapper.low <= smallest
        assert largest <= mapper.high < 4 * largest
        assert (_bar(fig).color_mapper.low, _bar(fig).color_mapper.high) == (
            mapper.low, mapper.high)
    h.color_scale = SCALES[2]  # logarithmic
    for fig in (h.fig_attention, h.fig_softmax):
        mapper = fig.renderers[0].glyph.color_mapper
        assert isinstance(mapper, LogColorMapper)
        assert isinstance(_bar(fig).color_mapper, LogColorMapper)
        assert mapper.low <= smallest and largest <= mapper.high
    play(d, 3)  # the limits follow the maps
    h.color_scale = SCALES[0]
    mapper = h.fig_attention.renderers[0].glyph.color_mapper
    assert isinstance(mapper, LinearColorMapper) and (mapper.low, mapper.high) == (0, 1)
    # each swap draws the map with a new image renderer of the same source, once
    for fig, source in ((h.fig_attention, h.attention), (h.fig_softmax, h.softmax)):
        images = [r for r in fig.renderers if hasattr(r.glyph, "color_mapper")]
        assert images == [fig.renderers[0]] and images[0].data_source is source


def test_scale_limits_change_in_steps():
    assert scale_limits(SCALES[1], 0.0, 1.0, 0.001, 0.03) == (0.0, 2.0**-5)
    assert scale_limits(SCALES[1], 0.0, 2.0**-5, 0.001, 0.025) is None  # still fills it
    assert scale_limits(SCALES[1], 0.0, 2.0**-5, 0.001, 0.004) == (4 * 2.0**-12, 17 * 2.0**-12)
    assert scale_limits(SCALES[2], 1e-3, 1.0, 2e-5, 0.3) == (1e-5, 1.0)
    assert scale_limits(SCALES[2], 1e-5, 1.0, 3e-5, 0.3) is None
    assert scale_limits(SCALES[2], 1e-3, 1.0, 0.0, 0.3)[0] == pytest.approx(1e-12)
    assert scale_limits(SCALES[0], 0.0, 0.5, 0.1, 0.2) == (0.0, 1.0)


def test_downloads_are_named_after_model_and_time_and_carry_the_settings(dash):
    dash.settings.beta = 2.5
    play(dash, 4)
    name = export.filename(dash, "csv")
    assert re.fullmatch(r"canonical_t0\.200_\d{8}-\d{6}\.csv", name)
    csv_button, nc_button = dash.downloads
    data = csv_button.callback()
    assert csv_button.filename.startswith("canonical_t0.200_")
    assert nc_button.callback().getvalue()[:3] == b"CDF"
    assert nc_button.filename.endswith(".nc") and nc_button.filename.startswith("canonical_")
    text = data.getvalue().decode()
    assert export.read_csv_settings(text) == dash.settings.values()
    table = pd.read_csv(io.StringIO(text))  # a plain read: no comment lines (issue #27)
    assert list(table.columns[:2]) == ["t", "free_energy"] and len(table) == 5
    assert json.loads(table[export.SETTINGS_COLUMN][0]) == dash.settings.values()
    assert table[export.SETTINGS_COLUMN][1:].isna().all()
    assert table["hamiltonian"].dtype == float and table["t"].iloc[1] > 0
    assert table["t"].iloc[-1] == pytest.approx(dash.sim.t)
    assert types.FunctionType is type(csv_button.callback)
