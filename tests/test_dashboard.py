"""Fast tier: drive the Dashboard through its parameters and methods (no browser)."""

import json
import math

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.events import Reset
from dashboard_support import all_finite, play, sources

from app import Dashboard
from app import presets as presets_module
from app.dashboard import TABS
from app.mainview.trajectories import TRAIL_EVERY
from app.models import applies
from app.serving import playback
from dynamics import Settings, models


def test_ticks_advance_and_fill_every_plot(dash):
    play(dash, 10)
    assert dash.sim.t == pytest.approx(10 * dash.steps_per_frame * dash.settings.dt)
    ts = dash.timeseries.source.data
    assert len(ts["t"]) == 11 and ts["t"][-1] == pytest.approx(dash.sim.t)
    image = dash.heatmaps.attention.data["image"][0]
    assert image.shape == (6, 6)
    np.testing.assert_allclose(image.sum(axis=1), 1.0, rtol=1e-5)
    assert len(dash.trajectories.tokens.data["x"]) == 6
    # a trail point every TRAIL_EVERY frames: frames 0, 2, ..., 10 of the 11
    assert len(dash.trajectories.trail.data["x"]) == 6 * len(range(0, 11, TRAIL_EVERY))
    assert all(all_finite(s) for s in sources(dash))
    assert "t = " in dash.status.object


def test_beta_change_continues_and_n_change_restarts(dash):
    play(dash, 5)
    t = dash.sim.t
    dash.settings.beta = 3.0
    play(dash, 1)
    assert dash.sim.t > t and len(dash.timeseries.source.data["t"]) == 7
    dash.settings.n_tokens = 9
    assert dash.sim.t == 0 and len(dash.timeseries.source.data["t"]) == 1
    assert dash.heatmaps.attention.data["image"][0].shape == (9, 9)
    play(dash, 2)
    assert len(dash.trajectories.tokens.data["x"]) == 9


def test_log_slider_maps_to_settings(dash):
    slider = dash.controls.widgets["beta"]
    slider.value = 1.0
    assert dash.settings.beta == pytest.approx(10.0)
    dash.settings.beta = 0.5
    assert slider.value == pytest.approx(math.log10(0.5))


def test_controls_follow_the_model(dash):
    w = dash.controls.widgets
    dash.settings.model = "attention"
    assert w["path"].visible and not w["kappa"].visible and not w["mass"].visible
    dash.settings.model = "value_matching"
    assert w["kappa"].visible and w["mass"].visible and not w["path"].visible
    assert list(w["model"].options) == list(models.names(part=1))
    assert not applies("gamma", Settings(model="reduced"))


@pytest.mark.parametrize("model", ["value_matching", "cotangent_lift", "transformer"])
def test_not_applicable_diagnostics_are_hidden_not_nan(model):
    d = Dashboard(settings=Settings(model=model, n_tokens=5, dim=3), playing=False)
    play(d, 3)
    assert all(all_finite(s) for s in sources(d))
    hidden = [k for k, r in d.timeseries.lines.items() if not r.visible]
    if model == "transformer":  # no energy law; KL and D ≡ 0; its energy is Φ (drawn
        # once); no momenta
        assert set(hidden) == {"residual", "kl", "kl_log", "kl_bound", "kl_bound_log",
                               "dissipation_rate", "dissipated", "d_potential", "momentum"}
    else:
        assert set(hidden) == {"kl_bound", "kl_bound_log"}


def test_presets_all_valid_and_load():
    d = Dashboard(playing=False)
    for preset in presets_module.load_presets():
        assert presets_module.validate(preset) == [], preset["name"]
        assert d.load_preset(preset)
        assert d.settings.model == preset["settings"]["model"]
        assert preset["name"] in d.caption.object
        play(d, 2)
        assert d.sim.status == "running"


def test_bad_preset_changes_nothing_and_lists_problems(dash):
    before = dash.settings.values()
    bad = {"name": "bad", "settings": {"bogus": 1, "beta": "two", "n_tokens": 3.5,
                                      "model": "linear"}}
    assert not dash.load_preset(bad)
    assert dash.settings.values() == before
    for word in ("caption", "bogus", "beta", "n_tokens", "model"):
        assert word in dash.notice
    assert dash.alert.visible


def test_quench_preset_changes_beta_during_the_run():
    d = Dashboard(playing=False, steps_per_frame=50)
    (quench,) = [p for p in presets_module.load_presets() if "quench" in p]
    assert d.load_preset(quench)
    play(d, 8)
    assert d.settings.beta == quench["quench"]["beta"]
    assert d.sim.t > quench["quench"]["at_t"]


def test_url_round_trip():
    d = Dashboard(settings=Settings(model="attention", beta=2.5, n_tokens=12, path="drift"),
                  steps_per_frame=7, playing=False)
    query = d.query
    assert query["beta"] == "2.5" and query["path"] == "drift" and query["steps_per_frame"] == "7"
    e = Dashboard(query=query, playing=False)
    assert e.notice == ""
    assert e.settings.values() == d.settings.values()
    assert e.steps_per_frame == 7


def test_bad_query_values_give_message_and_default():
    d = Dashboard(query={"beta": [b"5000"], "n_tokens": "many", "model": "linear",
                         "gamma": "nan", "zzz": "1", "dim": "3"}, playing=False)
    for word in ("beta", "[0.001, 1000]", "n_tokens", "model", "gamma", "zzz"):
        assert word in d.notice
    assert d.settings.beta == 1.0 and d.settings.n_tokens == 8 and d.settings.model == "canonical"
    assert d.settings.dim == 3
    assert d.alert.visible


def test_divergence_stops_the_run_without_nan():
    d = Dashboard(settings=Settings(model="canonical", confinement=0.0, beta=5.0,
                                    n_tokens=6, dim=3, norm_limit=30.0),
                  steps_per_frame=50, playing=True)
    play(d, 60)
    assert d.sim.status == "diverged"
    assert not d.playing
    assert "diverged at t" in d.status.object
    assert all(all_finite(s) for s in sources(d))
    t = d.sim.t
    play(d, 2)
    assert d.sim.t == t
    d.reset()
    assert d.sim.status == "running" and d.sim.t == 0


def test_comparison_mode_records_the_distance(dash):
    dash.compare = True
    assert dash.reference is not None and dash.timeseries.fig_distance.visible
    play(dash, 10)
    distance = dash.timeseries.source.data["distance"]
    assert distance[0] == 0.0 and distance[-1] > 0
    assert len(dash.trajectories.reference.data["x"]) == 6
    assert dash.reference.t == pytest.approx(dash.sim.t)
    dash.settings.n_tokens = 7
    play(dash, 3)
    assert dash.reference.t == pytest.approx(dash.sim.t)
    dash.compare = False
    assert dash.reference is None and not dash.timeseries.fig_distance.visible


def test_reset_clears_buffers(dash):
    play(dash, 5)
    dash.reset()
    assert dash.sim.t == 0 and len(dash.timeseries.source.data["t"]) == 1


def test_tick_error_stops_this_run_and_reset_recovers(dash, monkeypatch):
    def boom(n=1):
        raise RuntimeError("boom")

    monkeypatch.setattr(dash.sim, "advance", boom)
    dash.playing = True
    dash.tick()
    assert not dash.playing and "boom" in dash.status.object
    monkeypatch.undo()
    dash.reset()
    play(dash, 1)
    assert dash.sim.status == "running" and dash.sim.t > 0


def test_exports(dash):
    from app.mainview import export

    play(dash, 4)
    csv = export.csv_bytes(dash).getvalue().decode()
    lines = [line for line in csv.strip().splitlines() if not line.startswith("#")]
    assert lines[0].startswith("t,free_energy") and len(lines) == 6
    blob = export.netcdf_bytes(dash).getvalue()
    assert blob[:3] == b"CDF"


def test_time_axes_cover_the_visible_lines_and_respect_a_user_zoom(dash):
    ts = dash.timeseries
    for frames in (3, 40, 200):
        play(dash, frames)
        data = ts.source.data
        for fig in (ts.fig_kl_log, ts.fig_energy, ts.fig_rate):
            assert fig.x_range.start <= data["t"][0] and fig.x_range.end >= data["t"][-1]
            # the time axis is not mostly empty on the left
            assert data["t"][0] - fig.x_range.start <= 0.1 * (fig.x_range.end - fig.x_range.start)
            for key, line in ts.lines.items():
                if line in fig.renderers and line.visible:
                    values = np.asarray(data[key])
                    # (the kinetic energy on the energy plot's right-hand axis)
                    rng = fig.extra_y_ranges.get(line.y_range_name, fig.y_range)
                    assert rng.start <= values.min() * (1 + 1e-9) + 1e-12, key
                    assert rng.end >= values.max() * (1 - 1e-9) - 1e-12, key
    # the y range moves in steps: most batches leave it as it was
    before = (ts.fig_energy.y_range.start, ts.fig_energy.y_range.end)
    changes = 0
    for _ in range(20):
        play(dash, 1)
        now = (ts.fig_energy.y_range.start, ts.fig_energy.y_range.end)
        changes += now != before
        before = now
    assert changes <= 5
    # a zoom by the user stays until the Reset tool
    ts.fig_rate.x_range.update(start=0.1, end=0.2)
    play(dash, 5)
    assert (ts.fig_rate.x_range.start, ts.fig_rate.x_range.end) == (0.1, 0.2)
    doc = Document()  # the Reset tool's event, as the server hands it on from the page
    doc.add_root(ts.fig_rate)
    doc.callbacks.trigger_event(Reset(ts.fig_rate))
    assert ts.fig_rate.x_range.end >= ts.source.data["t"][-1]


def test_heatmap_log_ratio_symmetric_limits(dash):
    play(dash, 1)
    m = dash.heatmaps.ratio_mapper
    assert m.low == -m.high and m.high > 0
    ratio = dash.heatmaps.ratio.data["image"][0]
    assert np.abs(ratio).max() <= m.high + 1e-6


def test_preset_file_is_json_list():
    with open(presets_module.PRESET_FILE, encoding="utf-8") as fh:
        data = json.load(fh)
    assert isinstance(data, list) and len(data) >= 8


def test_time_going_back_resets_the_buffers(dash):
    play(dash, 5)
    dash.sim.reset()  # a restart the dashboard did not ask for
    play(dash, 1)
    t = dash.timeseries.source.data["t"]
    assert len(t) == 1 and t[0] == pytest.approx(dash.sim.t)
    assert len(dash.trajectories.trail.data["x"]) == dash.settings.n_tokens


def test_inertial_lab_and_theory_tabs():
    d = Dashboard(playing=False)
    tabs = d.__panel__()[-1]
    assert tabs is d.tabs and len(tabs) == 5
    names = [panel.title for panel in tabs.get_root().tabs]  # the titles the page shows
    assert names == list(TABS) and names[1:] == ["Inertial lab", "Theory",
                                                 "Noise ensemble", "Sweep"]


def test_beta_change_while_paused_redraws_the_softmax_without_advancing(dash):
    play(dash, 3)
    t, rows = dash.sim.t, len(dash.timeseries.source.data["t"])
    before = dash.heatmaps.softmax.data["image"][0].copy()
    dash.settings.beta = 4.0
    after = dash.heatmaps.softmax.data["image"][0]
    assert not np.allclose(before, after)
    assert dash.sim.t == t and len(dash.timeseries.source.data["t"]) == rows


def test_setting_changed_while_playing_is_sent_at_the_next_tick(dash, monkeypatch):
    """A β change skips the frame cap and takes one extra place of the in-flight limit,
    once; otherwise the cap and the limit hold (browser attached, flow control on)."""
    from app.serving.playback import MAX_IN_FLIGHT

    clock = [1000.0]  # the playback's clock, moved by hand
    monkeypatch.setattr(playback.time, "perf_counter", lambda: clock[0])
    dash.playing = True
    dash.periodic_callback, dash.flow_control = object(), True  # as with a page attached
    dash.tick()
    sent = dash.frame_id
    dash.acknowledge(sent)  # the page keeps up
    dash.tick()  # within 1/max_fps of the last frame: nothing sent
    assert dash.frame_id == sent
    dash.settings.beta = 2.5
    dash.tick()  # the change goes at once, computed with the new β
    assert dash.frame_id == sent + 1
    assert dash.heatmaps.softmax.data["beta"][0] == 2.5
    dash.tick()  # and only once
    assert dash.frame_id == sent + 1
    # the page is MAX_IN_FLIGHT + 1 frames behind (and acknowledged lately): a plain
    # tick waits, a change goes, once
    for _ in range(MAX_IN_FLIGHT):
        dash.step_once()  # (the Step button: frames sent without the tick's checks)
    behind = dash.frame_id
    assert behind - sent == MAX_IN_FLIGHT + 1
    dash.acknowledge(sent)
    clock[0] += 1.0 / dash.frame_cap()  # the frame cap lets a frame go
    dash.tick()
    assert dash.frame_id == behind
    dash.settings.beta = 3.0
    dash.tick()
    assert dash.frame_id == behind + 1
    dash.settings.beta = 3.5  # now MAX_IN_FLIGHT + 2 behind: even a change waits
    dash.tick()
    assert dash.frame_id == behind + 1


class _Running:
    """Stands for a server session's running periodic callback."""

    running, period = True, 10


def test_a_setting_changed_while_playing_on_a_server_is_sent_at_once(dash, monkeypatch):
    """On a server (flow control on) a changed setting's frame is computed and sent in
    the change's own handler, not at the periodic callback's next call (whose period
    grows to 100 ms on a busy server)."""
    monkeypatch.setattr(playback.time, "perf_counter", lambda: 1000.0)  # a frozen clock
    dash.playing = True
    dash.periodic_callback, dash.flow_control = _Running(), True
    dash.tick()
    sent = dash.frame_id
    dash.acknowledge(sent)
    dash.settings.beta = 2.5  # no tick called: the change alone sends the frame
    assert dash.frame_id == sent + 1
    assert dash.heatmaps.softmax.data["beta"][0] == 2.5
    assert not dash.change_pending  # used up: the next tick keeps to the cap
    dash.tick()
    assert dash.frame_id == sent + 1
    dash.periodic_callback = object()  # not running (paused by another tab): no frame at once
    dash.settings.beta = 3.0
    assert dash.frame_id == sent + 1 and dash.change_pending


def test_the_page_acknowledges_on_a_model_no_plot_draws(dash):
    """The ack goes to its own model (the attention image's source changing would make
    the page prepare and paint the image again), named for the client sessions."""
    from app.mainview.heatmaps import ACK_NAME

    h = dash.heatmaps
    assert h.ack.name == ACK_NAME and h.ack.data == {}
    drawn = {r.data_source for f in h.figures for r in f.renderers}
    assert h.ack not in drawn and h.attention in drawn
    (callback,) = h.attention.js_property_callbacks["change:data"]
    assert callback.args["ack"] is h.ack and "ack.tags = [" in callback.code
    assert "source.tags" not in callback.code


def test_no_frame_is_computed_after_the_session_is_destroyed(dash):
    """A callback still scheduled when the page's session is destroyed computes nothing."""
    dash.playing = True
    dash.periodic_callback, dash.flow_control = None, True  # as with a page attached
    dash.tick()
    sent, t = dash.frame_id, dash.sim.t
    dash.close()  # (what the server calls when the page's session is destroyed)
    dash.settings.beta = 3.0  # even a changed setting's frame
    assert dash.change_pending
    dash.tick()
    assert dash.frame_id == sent and dash.sim.t == t
