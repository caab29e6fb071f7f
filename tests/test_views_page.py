"""Issue #27 (a lecture-ready page), the views: heatmaps' colour scale and pointing at a
token, the Noise ensemble's bounds, progress and first result, the Sweep tab's first
result and its cancel, the inertial lab's stale notice, pinned runs and quench markers.
The browser tests are in ``tests/ui/test_views_page_browser.py``."""

from __future__ import annotations

import numpy as np
import pytest
from dashboard_support import play

from app.dashboard import Dashboard
from app.mainview.heatmaps import SCALES
from dynamics import Settings


# -- heatmaps ---------------------------------------------------------------------
def test_heatmaps_default_to_the_data_range():
    d = Dashboard(settings=Settings(), playing=False)
    play(d, 2)
    h = d.heatmaps
    assert h.color_scale == SCALES[1]
    mapper = h.fig_attention.renderers[0].glyph.color_mapper
    A, A_star = h.attention.data["image"][0], h.softmax.data["image"][0]
    lo, hi = min(A.min(), A_star.min()), max(A.max(), A_star.max())
    assert (mapper.low, mapper.high) != (0.0, 1.0)
    assert mapper.low <= lo and hi <= mapper.high
    # the entries fill at least half the scale: not a dark block
    assert hi - lo >= (mapper.high - mapper.low) / 1.5


def test_a_click_on_a_row_points_at_its_token_everywhere():
    """The maps and the token plot answer a click (the page's script: browser test)."""
    d = Dashboard(settings=Settings(), playing=False)
    h, tr = d.heatmaps, d.trajectories
    for fig in (*h.figures, tr.fig):
        scripts = fig.js_event_callbacks.get("tap", [])
        assert len(scripts) == 1
        assert scripts[0].args["rows"] is h.rows and scripts[0].args["chosen"] is tr.chosen
    # the tooltip reads the image, not the outline (which showed "A_ij: ???")
    from bokeh.models import HoverTool

    h.color_scale = SCALES[2]  # a new image renderer
    for fig in h.figures:
        assert fig.select_one(HoverTool).renderers == [fig.renderers[0]]
        assert type(fig.renderers[0].glyph).__name__ == "Image"
    # a run with another N forgets the token pointed at
    h.rows.data = {"y0": [2.5], "y1": [3.5]}
    tr.chosen.indices = [3]
    d.settings.n_tokens = 5
    play(d, 1)
    assert h.rows.data["y0"] == [] and tr.chosen.indices == []
    assert np.asarray(h.attention.data["image"][0]).shape == (5, 5)



# -- the noise ensemble ------------------------------------------------------------
def test_the_ensemble_widgets_take_the_views_bounds_and_refuse_by_name():
    from app.noise.ensemble import EnsembleView

    view = EnsembleView(settings=Settings(model="attention", n_tokens=3, dim=2,
                                          logit_noise=0.3))
    lo, hi = view.param.replicas.bounds
    assert (view.replicas_input.start, view.replicas_input.end) == (lo, hi) == (2, 256)
    view.t_end_input.value = 30.0  # above the old hidden maximum of 20: taken
    assert view.t_end == 30.0 and "not accepted" not in view.message.object
    view.t_end_input.value = 2000.0
    assert view.t_end == 30.0 and view.t_end_input.value == 30.0
    assert "t_end = 2000.0 not accepted" in view.message.object
    assert "between 0.01 and 1000" in view.message.object
    view.t_end_input.value = -1.0
    assert view.t_end == 30.0 and "t_end = -1.0 not accepted" in view.message.object


def test_the_ensemble_tab_opens_with_an_example_and_says_how_to_run_ones_own():
    from app.dashboard import TABS

    d = Dashboard(settings=Settings(n_tokens=4, dim=2, dt=0.02), playing=False)
    assert d.settings.logit_noise == 0.0  # the default: no band of its own
    tabs = d.__panel__()[-1]
    tabs.active = TABS.index("Noise ensemble")
    view = d.ensemble
    data = view.source.data
    assert len(data["t"]) > 1 and data["t"][-1] == pytest.approx(view.t_end)
    spread = np.asarray(data["kl_hi"]) - np.asarray(data["kl_lo"])
    assert spread[-1] > 0  # bands, not one line
    text = view.message.object
    assert text.startswith("**Example shown at first** (σ = 0.5: the main tab's σ is 0)")
    assert "press **Run ensemble**" in text and not view.progress.visible
    assert d.settings.logit_noise == 0.0  # the example changed no setting


# -- the inertial lab ---------------------------------------------------------------
def test_the_inertial_lab_says_when_its_plots_are_stale():
    from app.lab.inertial_lab import InertialLab

    lab = InertialLab()  # opens on its first preset, run
    assert lab.status.object and not lab.stale.visible
    lab.settings.theta = lab.settings.theta + 5.0
    assert lab.stale.visible and "Press **Run**" in lab.stale.object
    lab.run()
    assert not lab.stale.visible
    lab.kernel_input.value = "2,1"
    assert lab.stale.visible
    lab.kernel_input.value = lab.settings.kernel_diag  # back to the values shown
    assert not lab.stale.visible


# -- the sweep tab ------------------------------------------------------------------
def test_the_sweep_tab_opens_with_its_example_and_says_how_to_run_ones_own():
    from app.sweeps.sweep_tab import EXAMPLE_CHOICES, SweepTab, example_grid, read_example

    tab = SweepTab(settings=Settings(), example=True)
    assert all(getattr(tab, k) == v for k, v in EXAMPLE_CHOICES.items())
    z = tab.values["lag_amplitude"]
    assert z.shape == (8, 8) and np.isfinite(z).all() and (z > 0).all()
    assert tab.pipe.data["z"].shape == (8, 8)
    assert tab.theory_pipe.data is not None  # the two-source contours over it
    assert "Example shown at first" in tab.message.object
    assert "press **Run**" in tab.message.object
    # a click on a cell of the example loads that point into the live view
    loaded = []
    tab.on_point = loaded.append
    _, grid = example_grid()
    tab.load_cell(x=grid["beta"][2], y=grid["gamma"][5])
    assert loaded == [{"model": "attention", "path": "oscillation",
                       "beta": grid["beta"][2], "gamma": grid["gamma"][5]}]
    assert read_example()["x_values"] == grid["beta"]
    assert SweepTab(settings=Settings()).values == {}  # no example unless asked


def test_the_shipped_sweep_example_is_what_the_dynamics_give_today():
    """Cells of the example against fresh runs (regenerate it with write_example)."""
    from app.sweeps.sweep_tab import EXAMPLE_CHOICES, example_grid, read_example
    from dynamics.sweeps import run_point

    ex = read_example()
    base, grid = example_grid()
    assert ex["base"] == base and ex["y_values"] == grid["gamma"]
    for i, j in ((0, 0), (7, 7), (3, 5)):
        values = {**base, "beta": grid["beta"][i], "gamma": grid["gamma"][j]}
        fresh = run_point(values, EXAMPLE_CHOICES["t_end"], ["lag_amplitude"])
        assert ex["values"][j][i] == pytest.approx(fresh["lag_amplitude"], rel=1e-9)
        assert ex["status"][j][i] == fresh["status"] == "completed"


@pytest.mark.slow
def test_cancel_stops_the_workers_running_the_sweep():
    """A cancelled sweep's running batch is not left to run (it kept a core busy for
    about a minute): the worker running it is restarted."""
    import time

    from distributed import Client, LocalCluster

    from app.sweeps.sweep_tab import SweepTab
    from dynamics.sweeps import QUIET_CLUSTER

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      **QUIET_CLUSTER) as cluster, Client(cluster) as client:
        pid = client.run(lambda: __import__("os").getpid())
        tab = SweepTab(settings=Settings(model="attention", n_tokens=4, dim=2), client=client,
                       model="attention", x="beta", y="gamma", x_start=1.0, x_end=1.0,
                       y_start=1.0, y_end=1.0, cells=1, metric="kl_mean", t_end=1e4)
        assert tab.start()
        deadline = time.monotonic() + 120
        while not any(client.processing().values()):  # the batch runs on the worker
            assert time.monotonic() < deadline and tab.running
            time.sleep(0.1)
        tab.cancel()
        tab.wait(60)
        assert not tab.running and tab.message.object.startswith("cancelled after 0 of 1")
        assert tab.restarting is not None
        tab.restarting.join(120)
        client.wait_for_workers(1, timeout=120)
        new = client.run(lambda: __import__("os").getpid())
        assert set(new.values()).isdisjoint(pid.values())  # the worker process was replaced
        assert not any(client.processing().values())


# -- quenches and their markers -----------------------------------------------------
def _quench_preset():
    from app import presets

    return next(p for p in presets.load_presets() if p["name"].startswith("β quench"))


@pytest.mark.parametrize("page_frames", [False, True])
def test_a_preset_quench_is_applied_and_logged_once_at_its_time(page_frames):
    """Frames of 7 steps (t = 2.94, 3.01, …) stop at t = 3 for the quench; on a page a
    changed setting runs a frame at once (``_refresh``), which applied the quench again."""
    from types import SimpleNamespace

    d = Dashboard(playing=False)
    d.__panel__()
    assert d.load_preset(_quench_preset())
    d.steps_per_frame = 7
    if page_frames:  # as on a server with flow control: a change's frame at once
        d.flow_control, d.periodic_callback = True, SimpleNamespace(running=True)
    d.playing = True
    while d.sim.t < 4.0:
        d.advance_frame()
    assert len(d.sim.changes) == 1
    change = d.sim.changes[0]
    assert change.t == pytest.approx(3.0, abs=1e-9) and change.values == {"beta": (1.0, 5.0)}
    assert d.caption.object.count("Quench at t") == 1
    assert "*Quench at t = 3: beta → 5*" in d.caption.object
    assert [m[2] for m in d.timeseries.markers] == ["β 1 → 5"]


# -- pinned runs --------------------------------------------------------------------
def test_the_first_change_after_a_pin_restarts_the_run_from_the_same_start():
    d = Dashboard(settings=Settings(n_tokens=6, dim=3), playing=False)
    d.pinned.panel()
    play_frames(d, 20)
    t_pin = d.sim.t
    ghost = d.pinned.pin()
    d.settings.beta = 4.0  # a live setting: mid-run it would go on from the pinned state
    assert d.sim.t == 0 and not d.sim.changes
    assert "restarted from t = 0" in d.pinned.note.object
    play_frames(d, 20)
    data = d.timeseries.source.data
    t = np.asarray(data["t"])
    assert t[0] == 0 and t[-1] == pytest.approx(t_pin)  # the same times as the ghost …
    np.testing.assert_allclose(d.pinned.curves[0].data["t"], ghost.times)
    kl_ghost = np.interp(t, ghost.times, ghost.curves["kl"])
    assert np.max(np.abs(np.asarray(data["kl"]) - kl_ghost)) > 0.1  # … and curves apart
    # later changes apply mid-run (a quench against the pinned run)
    d.settings.gamma = 2.0
    assert d.sim.t > 0 and len(d.sim.changes) == 1
    d.pinned.clear()
    assert d.pinned.note.object == ""


def play_frames(d, frames):
    d.playing = True
    for _ in range(frames):
        d.advance_frame()
    d.playing = False


def test_labels_of_close_changes_do_not_pile_up():
    from app.mainview.markers import change_marks
    from dynamics.protocol import Change

    # a drag seen as changes 0.15 apart (more than three frames): one marker while the
    # plot shows 4 time units (each label ~8 characters, ~0.6 of them), from 1 to 4
    drag = [Change(1.0 + 0.15 * i, {"beta": (1.0 + 0.5 * i, 1.5 + 0.5 * i)}, 0.0)
            for i in range(7)]
    assert change_marks(drag, gap=0.15, span=4.0) == [(1.0, 1.9, "β 1 → 4.5")]
    # a quench and its reversal: two markers while their labels fit apart, one reading
    # "β 1 → 5 → 1" when they would overlap
    quench = [Change(3.0, {"beta": (1.0, 5.0)}, 0.0), Change(5.0, {"beta": (5.0, 1.0)}, 0.0)]
    assert change_marks(quench, gap=0.15, span=10.0) == [
        (3.0, 3.0, "β 1 → 5"), (5.0, 5.0, "β 5 → 1")]
    assert change_marks(quench, gap=0.15, span=100.0) == [(3.0, 5.0, "β 1 → 5 → 1")]
    # other settings close by join the label; a long back-and-forth is shortened
    wiggle = [Change(1.0 + 0.1 * i, {"beta": (v, w)}, 0.0)
              for i, (v, w) in enumerate([(1, 2), (2, 1), (1, 3), (3, 1), (1, 4)])]
    wiggle.append(Change(1.6, {"gamma": (1.0, 2.0)}, 0.0))
    assert change_marks(wiggle, gap=0.0, span=10.0) == [(1.0, 1.6, "β 1 → 2 → … → 4, γ 1 → 2")]
    # a drag whose label grows as it goes on: judged by the label drawn at its end
    # ("β 75 → 562.3", 12 characters of 55 across 10 time units: 2.2 > 1.8 apart), not
    # by its first step's ("β 75 → 80", 1.6 < 1.8)
    grows = [Change(1.0, {"beta": (1.0, 75.0)}, 0.0)] + [
        Change(2.8 + 0.1 * i, {"beta": (v, w)}, 0.0)
        for i, (v, w) in enumerate([(75, 80), (80, 200), (200, 562.3)])]
    assert change_marks(grows, gap=0.1, span=10.0) == [(1.0, 3.0, "β 1 → 562.3")]
    assert change_marks(grows[:2], gap=0.1, span=10.0) == [
        (1.0, 1.0, "β 1 → 75"), (2.8, 2.8, "β 75 → 80")]

    d = Dashboard(playing=False)
    d.playing = True
    while d.sim.t < 10:
        d.advance_frame()
    for k in range(1, 9):  # a drag: a change every 4 frames (0.2), past the drag gap
        d.settings.beta = 1.0 + 0.25 * k
        for _ in range(4):
            d.advance_frame()
    assert len(d.sim.changes) == 8
    ((t0, t1, label),) = d.timeseries.markers  # (the drag gap alone made 8)
    assert label == "β 1 → 3" and t1 - t0 == pytest.approx(1.4, abs=0.06)
