"""The Sweep tab (``app.sweeps.sweep_tab``): driven through its parameters with an in-process
dask cluster; the map's cells are the sweep's values, a click loads the cell's point."""

import io
import math

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster

from app.dashboard import TABS, Dashboard
from app.sweeps.grid import axis_values, cell_edges, sweepable
from app.sweeps.sweep_tab import SweepTab
from dynamics import Settings, sweep
from dynamics.sweeps import QUIET_CLUSTER, adaptive_sweep, two_source_lag_amplitude


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                      **QUIET_CLUSTER) as cluster, Client(cluster) as c:
        yield c


def small_tab(client, **params):
    settings = Settings(model="attention", path="oscillation", n_tokens=4, dim=2, dt=0.05)
    loaded = []
    tab = SweepTab(settings=settings, on_point=loaded.append, client=client,
                   **{"model": "attention", "x": "beta", "y": "gamma", "x_start": 0.5,
                      "x_end": 2.0, "y_start": 0.2, "y_end": 5.0, "cells": 3,
                      "metric": "lag_amplitude", "t_end": 0.5, **params})
    return tab, settings, loaded


def test_cells_fill_with_the_sweeps_values_and_a_click_loads_the_point(client):
    tab, settings, loaded = small_tab(client)
    assert tab.start(wait=True)
    assert tab.progress.value == tab.progress.max == 9
    assert tab.message.object.startswith("done: 9 points")
    expected = sweep(settings, tab.grid(), 0.5, ["lag_amplitude"], client=client)
    # the map's z is (gamma, beta): the transpose of the dataset's (beta, gamma)
    shown = tab.pipe.data["z"]
    assert np.array_equal(shown, expected["lag_amplitude"].values.T)
    np.testing.assert_allclose(tab.pipe.data["x"][1:-1] ** 2,
                               np.array(tab.axes[0][:-1]) * np.array(tab.axes[0][1:]))
    tab.load_cell(x=1.99, y=0.21)  # inside the last beta cell, the first gamma cell
    assert loaded == [{"model": "attention", "path": "oscillation", "beta": 2.0,
                       "gamma": pytest.approx(0.2)}]
    tab.load_cell(x=100.0, y=1.0)  # outside the map: nothing
    assert len(loaded) == 1


def test_a_grid_cell_s_tooltip_names_the_point_a_click_loads(client):
    """The hover of a cell shows the grid point's settings and value (``x_run``,
    ``y_run``, ``z_run``), not the cursor's: the point a click anywhere in it loads."""
    tab, _, loaded = small_tab(client)
    tab.start(wait=True)
    data = tab.pipe.data
    rng = np.random.default_rng(1)
    for _ in range(10):
        j, i = rng.integers(0, 3, size=2)
        x = np.exp(rng.uniform(np.log(data["x"][i]), np.log(data["x"][i + 1])))
        y = np.exp(rng.uniform(np.log(data["y"][j]), np.log(data["y"][j + 1])))
        tab.load_cell(x=x, y=y)
        assert (loaded[-1]["beta"], loaded[-1]["gamma"]) == (data["x_run"][j, i],
                                                             data["y_run"][j, i])
        assert data["z_run"][j, i] == data["z"][j, i]


def test_an_adaptive_map_fills_as_points_arrive_and_a_click_loads_the_nearest(client):
    tab, settings, loaded = small_tab(client, sampler="adaptive", points=10)
    arrived = []
    tab.progress.param.watch(lambda e: arrived.append(len(tab.pipe.data["px"])), "value")
    assert tab.start(wait=True)
    assert tab.progress.value == tab.progress.max == 10
    assert arrived[-1] == 10 and 0 < arrived[-2] < 10, arrived  # drawn round by round
    ranges = {"beta": (0.5, 2.0, "log"), "gamma": (0.2, 5.0, "log")}
    expected = adaptive_sweep(Settings(**tab.run.base), ranges, 10, 0.5, ["lag_amplitude"],
                              where="local")
    xr.testing.assert_identical(tab.dataset(), expected)
    data = tab.pipe.data
    assert np.array_equal(np.sort(data["px"]), np.sort(expected["beta"].values))
    assert np.isfinite(data["z"]).all()  # the corners came first: the hull is the map
    lo, hi = np.nanmin(expected["lag_amplitude"]), np.nanmax(expected["lag_amplitude"])
    assert lo - 1e-12 <= np.nanmin(data["z"]) and np.nanmax(data["z"]) <= hi + 1e-12
    rng = np.random.default_rng(2)
    for x, y in zip(np.exp(rng.uniform(np.log(0.5), np.log(2.0), 20)),
                    np.exp(rng.uniform(np.log(0.2), np.log(5.0), 20)), strict=True):
        tab.load_cell(x=x, y=y)
        i = np.searchsorted(data["x"], x) - 1
        j = np.searchsorted(data["y"], y) - 1
        # the run loaded is the one the cell's tooltip names, the sample nearest the cell
        assert (loaded[-1]["beta"], loaded[-1]["gamma"]) == (data["x_run"][j, i],
                                                             data["y_run"][j, i])
        u = np.log(np.array([data["px"], data["py"]]).T)
        centre = np.log([np.sqrt(data["x"][i] * data["x"][i + 1]),
                         np.sqrt(data["y"][j] * data["y"][j + 1])])
        span = np.log([2.0 / 0.5, 5.0 / 0.2])
        k = np.argmin((((u - centre) / span) ** 2).sum(axis=1))
        assert (data["px"][k], data["py"][k]) == (loaded[-1]["beta"], loaded[-1]["gamma"])
    assert len(loaded) == 20


def test_cancel_stops_an_adaptive_sweep_and_keeps_its_points(client):
    tab, _, _ = small_tab(client, sampler="adaptive", points=40, t_end=2.0)

    def cancel_after_first(event):  # "Cancel" pressed once the first points are in
        if event.new:
            tab.cancel_button.clicks += 1

    tab.progress.param.watch(cancel_after_first, "value")
    tab.start(wait=True)
    assert tab.message.object.startswith("cancelled after") and tab.run.cancelled
    ds = tab.dataset()
    done = (ds["status"].values == "completed").sum()
    assert 1 <= done < 40 and len(tab.pipe.data["px"]) == done
    assert not tab.run_button.disabled and tab.cancel_button.disabled


def test_the_map_exports_as_netcdf_and_csv(client):
    tab, _, _ = small_tab(client)
    assert tab.show_example()  # the shipped example exports too
    nc, csv = (button.callback() for button in tab.downloads)
    with xr.open_dataset(io.BytesIO(nc.getvalue()), engine="scipy") as ds:
        assert ds["lag_amplitude"].shape == (8, 8) and ds.attrs["setting_path"] == \
            "oscillation"
        assert np.array_equal(ds["lag_amplitude"].values.T, tab.values["lag_amplitude"],
                              equal_nan=True)
    header, *rows = csv.getvalue().decode().splitlines()
    assert header.split(",")[:3] == ["beta", "gamma", "lag_amplitude"] and len(rows) == 64
    tab.param.update(sampler="adaptive", points=6, cells=3, x_start=0.5, x_end=2.0,
                     y_start=0.2, y_end=5.0, t_end=0.5)
    tab.start(wait=True)
    nc, csv = (button.callback() for button in tab.downloads)
    with xr.open_dataset(io.BytesIO(nc.getvalue()), engine="scipy") as ds:
        xr.testing.assert_identical(ds.load(), tab.dataset())
    header, *rows = csv.getvalue().decode().splitlines()
    assert header.split(",")[:3] == ["point", "beta", "gamma"] and len(rows) == 6


def test_theory_contours_of_the_two_source_lag(client):
    tab, settings, _ = small_tab(client)
    tab.start(wait=True)
    data = tab.theory_pipe.data
    b, g = np.meshgrid(data["x"], data["y"])
    assert np.array_equal(data["z"], two_source_lag_amplitude(b, g, settings.omega,
                                                              settings.amplitude))
    assert len(tab.theory[()].split()) >= 1  # contour lines drawn
    tab.metric = "kl_mean"
    tab.start(wait=True)
    assert tab.theory_pipe.data is None  # no theory for this metric
    tab.param.update(metric="lag_amplitude", path="rotation")
    tab.start(wait=True)
    assert tab.run.base["path"] == "rotation" and tab.theory_pipe.data is None  # nor path


def test_blowup_map_shows_first_order_t_max_beside(client):
    tab, _, _ = small_tab(client, model="linear_accelerated")
    assert "alpha" in tab.param.x.objects and "value_diag" in tab.param.x.objects
    tab.param.update(x="alpha", x_start=0.0, x_end=1.0, x_log=False, y="value_diag",
                     y_start=0.5, y_end=2.0, metric="blowup_time", cells=2)
    tab.start(wait=True)
    assert tab.second_pane.visible
    assert tab.pipe.data["second"] == pytest.approx(np.array([[2.0, 2.0], [0.5, 0.5]]))
    assert tab.pipe.data["z"][0, 0] == pytest.approx(math.pi, abs=2e-3)  # v = 0.5, α = 0


def test_refused_choices_say_why_and_run_nothing(client):
    tab, _, _ = small_tab(client, x_end=5000.0)
    assert not tab.start()
    assert "beta must be in" in tab.message.object and tab.run is None
    tab.param.update(x_end=2.0, y="beta")
    assert not tab.start() and "two different settings" in tab.message.object


def test_cancel_stops_the_sweep_and_keeps_finished_cells(client):
    tab, _, _ = small_tab(client, cells=6, t_end=2.0)

    def cancel_after_first(event):  # "Cancel" pressed once the first cells are in
        if event.new:
            tab.cancel_button.clicks += 1

    tab.progress.param.watch(cancel_after_first, "value")
    tab.start(wait=True)
    assert tab.message.object.startswith("cancelled after")
    z = tab.pipe.data["z"]
    assert 1 <= np.isfinite(z).sum() < 36
    assert not tab.run_button.disabled and tab.cancel_button.disabled


def test_helpers():
    assert "beta" in sweepable("canonical") and "norm_limit" not in sweepable("canonical")
    assert "dt" in sweepable("canonical") and "seed" not in sweepable("canonical")
    np.testing.assert_allclose(axis_values(1, 100, 3, True), [1, 10, 100])
    np.testing.assert_allclose(cell_edges([1, 10, 100], True), [0.1 ** 0.5, 10 ** 0.5,
                                                                 1000 ** 0.5, 10 ** 2.5])
    np.testing.assert_allclose(cell_edges([0, 1, 2], False), [-0.5, 0.5, 1.5, 2.5])
    with pytest.raises(ValueError, match="positive"):
        axis_values(0, 1, 3, True)


def test_dashboard_sweep_tab_loads_a_clicked_point_into_the_live_view():
    d = Dashboard(playing=False)
    d.__panel__()
    d.tabs.active = TABS.index("Sweep")
    tab = d.sweep_tab
    # the tab opens on its example, whose choices the controls show (issue #27)
    assert isinstance(tab, SweepTab) and tab.model == "attention"
    assert tab.metric == "lag_amplitude" and np.isfinite(tab.values["lag_amplitude"]).all()
    tab.on_point({"model": "canonical", "beta": 2.5, "gamma": 0.4})
    assert d.tabs.active == 0
    assert (d.settings.model, d.settings.beta, d.settings.gamma) == ("canonical", 2.5, 0.4)
    tab.on_point({"model": "linear_accelerated", "alpha": 0.5})  # not a main-tab model
    assert d.settings.model == "canonical"
    assert tab.message.object.startswith("**Not loaded into the live view:**")
    assert "model must be one of" in tab.message.object


@pytest.mark.slow
def test_the_tab_renders_to_bokeh_after_a_run(client):
    """The plots' options are valid Bokeh ones: the tab renders, the map with hover and
    tap tools, the theory as contour lines over it, the colours spanning the values."""
    from bokeh.models import HoverTool, LinearColorMapper, MultiLine, TapTool

    tab, _, _ = small_tab(client)
    tab.__panel__().get_root()  # before any result: a blank map
    tab.start(wait=True)
    root = tab.__panel__().get_root()
    hovers = list(root.select({"type": HoverTool}))
    assert hovers and list(root.select({"type": TapTool}))
    # the tooltip names the run a click loads, not the cursor's position
    assert any([v for _, v in h.tooltips] == ["@{x_run}", "@{y_run}", "@{z_run}"]
               and h.tooltips[0][0].endswith("(run)") for h in hovers)
    assert list(root.select({"type": MultiLine}))  # the theory contours
    z = tab.pipe.data["z"]
    limits = [(m.low, m.high) for m in root.select({"type": LinearColorMapper})]
    assert (np.nanmin(z), np.nanmax(z)) in limits  # the map's (the other: the hidden T_max)
