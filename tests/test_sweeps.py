"""Parameter sweeps on dask.distributed (``dynamics.sweep``, ``python -m dynamics sweep``).

Every point of a sweep is checked against a plain ``simulate`` of the same settings, bit
for bit, on real ``LocalCluster`` workers (threads, and once processes); the metrics
against independent computations (scipy's trapezoid, the frames' own softmax, closed
forms of the Theory page's Part II, a ``solve_ivp`` of the two-source lag).
"""

import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster
from scipy.integrate import solve_ivp, trapezoid

from dynamics import Settings, Simulation, SweepRun, simulate, sweep
from dynamics.cli import main
from dynamics.sweeps import (
    METRICS,
    QUIET_CLUSTER,
    check_grid,
    cluster_pays,
    default_metrics,
    grid_points,
    lab_metrics,
    parse_axis,
    predict_schedule,
    task_sizes,
    trajectory_metrics,
    two_source_lag_amplitude,
)

BASE = Settings(model="attention", path="oscillation", n_tokens=4, dim=2, dt=0.02)
GRID = {"beta": [0.5, 1.0, 4.0], "gamma": [0.3, 3.0]}
T_END = 1.0
PART_ONE = default_metrics("attention")


def _cluster(workers, processes=False):
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                        protocol="tcp://", **QUIET_CLUSTER)


@pytest.fixture(scope="module")
def client():
    """Two single-threaded workers in this process (real scheduler and workers over TCP)."""
    with _cluster(2) as cluster, Client(cluster, set_as_default=False) as c:
        yield c


def plain(settings, point, t_end=T_END, every=1, metrics=PART_ONE):
    """The metrics of a plain ``simulate`` of one point."""
    run = simulate(settings.copy(**point), t_end=t_end, every=every)
    return run, trajectory_metrics(run, metrics)


def assert_same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    numeric = a.dtype.kind == "f" and b.dtype.kind == "f"
    assert np.array_equal(a, b, equal_nan=numeric), (a, b)


def test_import_dynamics_does_not_import_dask_or_xarray():
    code = ("import sys, dynamics; print(sorted({'dask', 'distributed', 'xarray'} "
            "& set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# -- the grid -----------------------------------------------------------------------------
def test_parse_axis_spacings_lists_and_types():
    name, values = parse_axis("beta=0.1:10:log:16")
    assert name == "beta" and len(values) == 16
    np.testing.assert_allclose(values[0], 0.1) and np.testing.assert_allclose(values[-1], 10)
    np.testing.assert_allclose(np.diff(np.log(values)), np.log(100) / 15)
    assert parse_axis("gamma=1:3:lin:3") == ("gamma", [1.0, 2.0, 3.0])
    assert parse_axis("gamma=1:3:3") == ("gamma", [1.0, 2.0, 3.0])
    assert parse_axis("n-tokens=2,4") == ("n_tokens", [2, 4])
    assert parse_axis("path=rotation,drift") == ("path", ["rotation", "drift"])
    for bad in ("beta", "beta=", "zeta=1,2", "beta=0:1:log:3", "beta=1:2:cubic:3",
                "beta=a,b", "path=1:2:3", "beta=1:2:0"):
        with pytest.raises(ValueError, match="grid axis"):
            parse_axis(bad)


def test_grid_out_of_bounds_is_refused_before_anything_runs():
    class NoCluster:  # any use of the client would fail the test
        def __getattr__(self, name):
            raise AssertionError(f"the sweep touched its client ({name})")

    with pytest.raises(ValueError, match=r"beta must be in \[0.001, 1000\], got 5000"):
        sweep(BASE, grid={"beta": [1.0, 5000.0]}, client=NoCluster())
    with pytest.raises(ValueError) as err:
        sweep(BASE, grid={"gamma": [-1.0], "n_tokens": [1], "zeta": [1]}, client=NoCluster())
    for text in ("gamma", "n_tokens", "unknown setting 'zeta'"):
        assert text in str(err.value)
    for grid in ({}, {"beta": []}, {"beta": [1.0, 1.0]}):
        with pytest.raises(ValueError, match="grid"):
            sweep(BASE, grid=grid, client=NoCluster())
    with pytest.raises(ValueError, match="metrics"):
        sweep(BASE, grid=GRID, metrics=["kl_median"], client=NoCluster())


def test_grid_points_cover_the_product_in_order():
    grid = check_grid(BASE, {"beta": [1, 2], "value_diag": [0.5, -1], "path": ["static"]})
    assert grid == {"beta": [1.0, 2.0], "value_diag": ["0.5", "-1.0"], "path": ["static"]}
    points = grid_points(grid)
    assert [p[0] for p in points] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    assert points[1][1] == {"beta": 1.0, "value_diag": "-1.0", "path": "static"}


# -- metrics against independent computations --------------------------------------------
def test_part_one_metrics_against_the_run_itself():
    run = simulate(BASE.copy(beta=2.0, gamma=0.5), t_end=2.0, every=3)
    m = trajectory_metrics(run, list(METRICS))
    kl, t = run.diagnostics["kl"], run.times
    assert m["kl_mean"] == pytest.approx(trapezoid(kl, t) / 2.0, rel=1e-12)
    assert m["kl_final"] == kl[-1] and m["dissipated"] == run.diagnostics["dissipated"][-1]
    assert m["kl_ratio_max"] == pytest.approx(
        max(k / b for k, b in zip(kl, run.diagnostics["kl_bound"], strict=True) if b > 0))
    assert 0 < m["kl_ratio_max"] <= 1  # the tracking bound holds
    assert m["energy_residual_max"] == np.abs(run.diagnostics["energy_residual"]).max()
    assert math.isnan(m["diverged_at"]) and m["t_final"] == pytest.approx(2.0)
    assert all(math.isnan(m[k]) for k in METRICS if METRICS[k].part == 2)


def test_lag_amplitude_against_the_frames_softmax():
    """Recomputed from the frames' own ``A*`` (the diagnostics code), over the second half."""
    settings = BASE.copy(beta=2.0, gamma=0.5)
    sim, lags = Simulation(settings), []
    n_steps = int(round(2.0 / settings.dt))
    for k in range(n_steps + 1):
        frame = sim.frame()
        if k >= (n_steps + 1) // 2:
            diff = np.log(frame.attention) - np.log(frame.softmax)
            lags.append(np.max(diff.max(axis=1) - diff.min(axis=1)))
        if k < n_steps:
            sim.advance(1)
    measured = trajectory_metrics(simulate(settings, t_end=2.0), ["lag_amplitude"])
    assert measured["lag_amplitude"] == pytest.approx(max(lags), rel=1e-9)


def test_two_source_lag_amplitude_against_solve_ivp():
    """One row, two sources, score difference δ sin ωt: the log-odds lag obeys
    ``dw/dt = −λ w − β δ ω cos ωt``; its late amplitude is the formula's."""
    for beta, gamma, omega, delta in [(2.0, 1.0, 1.5, 0.3), (0.5, 3.0, 4.0, 1.0)]:
        lam = gamma / beta
        sol = solve_ivp(lambda t, w, lam=lam, b=beta * delta, om=omega: -lam * w
                        - b * om * np.cos(om * t),
                        (0, 40 / lam + 20), [0.0], rtol=1e-10, atol=1e-12, dense_output=True)
        late = sol.sol(np.linspace(sol.t[-1] - 4 * np.pi / omega, sol.t[-1], 4001))[0]
        assert np.max(np.abs(late)) == pytest.approx(
            two_source_lag_amplitude(beta, gamma, omega, delta), rel=1e-4)


def _scalar_blowup(alpha):
    """Blow-up time of the scalar moment system ``ṡ = 2 a p s²``,
    ``ṗ = −α p − 2 a s p² + v`` (a = v = 1, s(0) = 1/2, p(0) = 0) by ``solve_ivp``: the
    time ``s`` reaches 1e14 (within 1e-6 of the blow-up)."""
    def event(t, y):
        return y[0] - 1e14

    event.terminal = True
    sol = solve_ivp(lambda t, y: [2 * y[1] * y[0] ** 2, -alpha * y[1] - 2 * y[0] * y[1] ** 2
                                  + 1.0], (0, 10), [0.5, 0.0], method="DOP853", rtol=1e-13,
                    atol=1e-14, events=event)
    return float(sol.t_events[0][0])


def test_part_two_metrics_against_closed_forms():
    """Scalar case a = v = 1, s0 = 0.5, P(0) = 0, α = 0: accelerated blow-up at π/√2
    (at α = 1 as a tight solve_ivp of the scalar system); first order at 1/(2 a v s0);
    none when V ⪯ 0; the first crossing layer within a few layers of ⌈T_θ/h⌉."""
    names = [k for k in METRICS if METRICS[k].part == 2]
    values = Settings(model="linear_accelerated", alpha=0.0, second_moment=0.5).values()
    m = lab_metrics(values, names)
    assert m["blowup_time"] == pytest.approx(math.pi / math.sqrt(2), abs=1e-3)
    assert m["first_order_blowup_time"] == pytest.approx(1.0, rel=1e-12)
    assert abs(m["crossing_layer"] - m["predicted_layer"]) <= 3
    damped = lab_metrics({**values, "alpha": 1.0}, names)
    assert damped["blowup_time"] == pytest.approx(_scalar_blowup(1.0), abs=2e-4)
    stable = lab_metrics({**values, "value_diag": "-1"}, names)
    assert all(math.isnan(stable[k]) for k in names)
    part_one = lab_metrics(BASE.values(), names)
    assert all(math.isnan(part_one[k]) for k in names)


# -- the distributed engine ----------------------------------------------------------------
@pytest.mark.parametrize("where", ["local", "cluster"])
def test_sweep_equals_plain_simulate_bit_for_bit(client, where):
    run = SweepRun(BASE, GRID, t_end=T_END, client=client, where=where)
    ds = run.run()
    assert run.ran_on == where
    assert (run.local_points, run.cluster_points) == ((6, 0) if where == "local" else (0, 6))
    assert list(ds.sizes.items()) == [("beta", 3), ("gamma", 2)]
    assert set(PART_ONE) <= set(ds.data_vars)
    assert ds.attrs["setting_path"] == "oscillation" and ds.attrs["t_end"] == T_END
    assert "setting_beta" not in ds.attrs  # a swept setting is a coordinate
    for i, beta in enumerate(GRID["beta"]):
        for j, gamma in enumerate(GRID["gamma"]):
            _, expected = plain(BASE, {"beta": beta, "gamma": gamma})
            for name, value in expected.items():
                assert_same_bits(ds[name].values[i, j], value)
            assert ds["status"].values[i, j] == "completed"


def test_stochastic_logits_are_seeded_per_point(client):
    """With logit noise each point is still a plain ``simulate`` of its settings (its noise
    drawn from its seed), whatever the worker that runs it."""
    noisy = Settings(model="canonical", n_tokens=4, dim=2, dt=0.02, logit_noise=0.5)
    ds = sweep(noisy, {"beta": [0.5, 2.0], "seed": [0, 1]}, t_end=T_END, client=client,
               batch_size=1, where="cluster")
    for i, beta in enumerate([0.5, 2.0]):
        for j, seed in enumerate([0, 1]):
            _, expected = plain(noisy, {"beta": beta, "seed": seed})
            assert_same_bits(ds["kl_mean"].values[i, j], expected["kl_mean"])
    assert ds["kl_mean"].values[0, 0] != ds["kl_mean"].values[0, 1]  # the seed matters


def test_result_does_not_depend_on_where_workers_or_batching(client):
    reference = sweep(BASE, GRID, t_end=T_END, client=client, batch_size=1, where="cluster")
    for batch_size in (2, 4, None):
        xr.testing.assert_identical(
            sweep(BASE, GRID, t_end=T_END, client=client, batch_size=batch_size,
                  where="cluster"), reference)
    with _cluster(1) as cluster, Client(cluster, set_as_default=False) as one:
        xr.testing.assert_identical(sweep(BASE, GRID, t_end=T_END, client=one,
                                          where="cluster"), reference)
    for where in ("local", "auto"):
        xr.testing.assert_identical(sweep(BASE, GRID, t_end=T_END, where=where), reference)
    # an embedded cluster, started, waited for (every point on it, however few), closed
    run = SweepRun(BASE, GRID, t_end=T_END, where="cluster", workers=2, processes=False)
    xr.testing.assert_identical(run.run(), reference)
    assert (run.ran_on, run.local_points, run.cluster_points) == ("cluster", 0, 6)
    assert not [t for t in threading.enumerate() if t.name == "sweep-cluster-start"]


@pytest.mark.parametrize("most, calls", [(16, [5]), (2, [2, 2])])
def test_a_task_steps_its_canonical_points_together_with_run_point_s_results(
        monkeypatch, most, calls):
    """``run_batch`` (one task) runs its canonical points through ``simulate_batch``, at
    most ``BATCH_RUNS`` at a time (a task's trajectories are not all held at once), and
    gives exactly ``run_point``'s results: stiff points (run alone), a point that
    diverges, one whose settings are refused, and one of another size among them."""
    import dynamics.batch
    import dynamics.sweeps.points

    monkeypatch.setattr(dynamics.sweeps.points, "BATCH_RUNS", most)
    from dynamics.sweeps import run_batch, run_point

    base = Settings(model="canonical", n_tokens=4, dim=2, dt=0.02).values()
    points = [{**base, "beta": b, "gamma": g} for b in (0.5, 2.0) for g in (0.3, 1.0)]
    points += [{**base, "gamma": 1000.0},                 # stiff: alone
               {**base, "norm_limit": 1.0},               # diverges inside the batch
               {**base, "beta": -1.0},                    # refused by Settings
               {**base, "n_tokens": 5}]                   # another size: alone
    batch = [((k,), values) for k, values in enumerate(points)]
    batched = []
    real = dynamics.batch.simulate_batch
    monkeypatch.setattr(dynamics.batch, "simulate_batch",
                        lambda runs, *a: batched.append(len(runs)) or real(runs, *a))
    metrics = ["kl_mean", "kl_final", "kl_ratio_max", "lag_amplitude", "dissipated",
               "energy_residual_max", "diverged_at"]
    results = run_batch(batch, T_END, metrics)
    assert batched == calls  # the four grid points and the diverging one (a last one
    # alone runs through simulate)
    assert [index for index, _ in results] == [(k,) for k in range(len(points))]
    for (_, got), values in zip(results, points, strict=True):
        expected = run_point(values, T_END, metrics)
        assert got.keys() == expected.keys()
        for key in metrics:
            assert_same_bits(got[key], expected[key])
        assert (got["status"], got["message"]) == (expected["status"], expected["message"])
    statuses = [r["status"] for _, r in results]
    assert statuses[5] == "diverged" and statuses[6] == "error"
    assert statuses.count("completed") == 6


def test_diverged_and_broken_points_are_recorded_not_raised(client):
    ds = sweep(BASE, {"norm_limit": [1.0, 1e6]}, t_end=T_END, client=client,
               where="cluster")
    assert list(ds["status"].values) == ["diverged", "completed"]
    run, _ = plain(BASE, {"norm_limit": 1.0})
    assert ds["diverged_at"].values[0] == run.diverged_at and "diverged at" in \
        ds["message"].values[0]
    assert math.isnan(ds["diverged_at"].values[1])
    broken = sweep(Settings(model="linear_accelerated", dim=2),
                   {"value_diag": ["1", "1,2,3", "2"]}, t_end=0.1, client=client,
                   where="cluster")
    assert list(broken["status"].values) == ["completed", "error", "completed"]
    assert "value" in broken["message"].values[1]
    assert all(math.isnan(broken[m].values[1]) for m in default_metrics("linear_accelerated"))
    assert np.isfinite(broken["blowup_time"].values[0])


def test_cancel_keeps_finished_points_and_marks_the_rest(client):
    grid = {"beta": list(np.geomspace(0.5, 4, 8)), "gamma": [0.5, 2.0]}
    seen = []

    def cancel_after_first(results, done, total):  # after two tasks of the cluster
        seen.append(done)
        if len(seen) == 2:
            run.cancel()

    run = SweepRun(BASE, grid, t_end=T_END, client=client, batch_size=1,
                   on_batch=cancel_after_first, where="cluster")
    ds = run.run()
    status = ds["status"].values
    finished = status != "cancelled"
    assert seen[:2] == [1, 2] and 2 <= finished.sum() < 16 and run.cancelled
    assert np.all(np.isnan(ds["kl_mean"].values[~finished]))
    for i, j in zip(*np.nonzero(finished), strict=True):
        _, expected = plain(BASE, {"beta": grid["beta"][i], "gamma": grid["gamma"][j]})
        assert_same_bits(ds["kl_mean"].values[i, j], expected["kl_mean"])


_HOLD = threading.Event()


def _held(batch):
    """A task that runs until :data:`_HOLD` is set (the workers of ``client`` are threads
    of this process)."""
    _HOLD.wait(60)
    return batch


def test_a_task_cancelled_while_it_runs_is_still_found_on_its_worker(client):
    """A cancelled task that runs goes on in its worker's thread, where the scheduler no
    longer lists it: ``workers_running`` finds it there (the Sweep tab's cancel restarts
    that worker; in CI it had missed a task the scheduler handed out as it cancelled)."""
    from dynamics.sweeps.cluster import ClusterTasks

    _HOLD.clear()
    tasks = ClusterTasks(client, [(0, {})], [1])
    tasks.submit(_held)
    try:
        deadline = time.monotonic() + 30
        while not tasks.workers_running():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        [worker] = tasks.workers_running()
        tasks.cancel()
        deadline = time.monotonic() + 10
        while any(client.processing().values()):  # the scheduler forgets it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert tasks.workers_running() == {worker}  # its thread still runs it
    finally:
        _HOLD.set()
    deadline = time.monotonic() + 30
    while tasks.workers_running():  # and once it returns, no worker runs it
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_tasks_cancelled_before_their_submit_are_never_submitted(client):
    from dynamics.sweeps.cluster import ClusterTasks

    tasks = ClusterTasks(client, [(0, {}), (1, {})], [1, 1])
    tasks.cancel()
    tasks.submit(_held)
    assert tasks.futures == [] and tasks.keys == set() and tasks.workers_running() == set()


# -- where a sweep runs, and its tasks -----------------------------------------------------
def test_a_small_sweep_runs_here_without_starting_a_cluster(tmp_path):
    """No client, a sweep of two short points: run in this process (dask.distributed
    never imported, not even to write the NetCDF file: no cluster start-up paid), each
    point a plain ``simulate``, bit for bit."""
    path = tmp_path / "small.nc"
    code = ("import json, sys\n"
            "from dynamics import Settings, SweepRun\n"
            "from dynamics.sweeps import netcdf_bytes\n"
            "base = Settings(model='attention', path='oscillation', n_tokens=4, dim=2, "
            "dt=0.02)\n"
            "run = SweepRun(base, {'beta': [0.5, 2.0]}, t_end=0.5, metrics=['kl_mean'])\n"
            "ds = run.run()\n"
            f"open({str(path)!r}, 'wb').write(netcdf_bytes(ds))\n"
            "print(json.dumps([run.ran_on, run.local_points, 'distributed' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    ran_on, local_points, dask_imported = json.loads(out.stdout)
    assert (ran_on, local_points, dask_imported) == ("local", 2, False)
    with xr.open_dataset(path, engine="scipy") as ds:
        values = ds["kl_mean"].values
    for beta, value in zip([0.5, 2.0], values, strict=True):
        _, expected = plain(BASE, {"beta": beta}, t_end=0.5, metrics=["kl_mean"])
        assert_same_bits(value, expected["kl_mean"])


def test_cli_sweep_run_here_imports_no_dask_and_writes_the_same_file(tmp_path):
    """``python -m dynamics sweep`` of a few short points: Dask is never imported (xarray
    would import ``dask.array`` for the result and its file), the file is byte for byte
    the one written where Dask is imported, and Dask imports fine afterwards."""
    out = tmp_path / "light.nc"
    argv = ["sweep", "--model", "attention", "--path", "oscillation", "--n-tokens", "4",
            "--dim", "2", "--dt", "0.02", "--grid", "beta=0.5,2", "--t-end", "0.5",
            "--metric", "kl_mean", "--out", str(out), "--no-cache", "--quiet"]
    code = ("import json, sys\n"
            "from dynamics.cli import main\n"
            f"assert main({argv!r}) == 0\n"
            "seen = sorted({'dask', 'distributed'} & set(sys.modules))\n"
            "import dask.array\n"
            "print(json.dumps(seen))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    from dynamics.sweeps import netcdf_bytes

    ds = sweep(BASE, {"beta": [0.5, 2.0]}, 0.5, ["kl_mean"], where="local")
    assert out.read_bytes() == netcdf_bytes(ds)


def test_auto_goes_to_a_cluster_only_when_the_schedule_model_says_it_pays(client, monkeypatch):
    """``where="auto"``: the cluster's start-up against the points' estimated cost. A
    client given as a callable is called only when the sweep goes to a cluster; a given
    client's start-up is :data:`CLIENT_STARTUP_S`. The bits are the same either way."""
    import dynamics.sweeps.schedule as schedule

    calls = []

    def factory():
        calls.append(1)
        return client

    monkeypatch.setattr(schedule, "CLUSTER_STARTUP_S", 1e9)  # a cluster never pays
    here = SweepRun(BASE, GRID, T_END, client=factory, workers=2)
    reference = here.run()
    assert (here.ran_on, here.local_points, calls) == ("local", 6, [])
    assert here.cost > 0
    monkeypatch.setattr(schedule, "CLUSTER_STARTUP_S", 0.0)  # it always pays
    monkeypatch.setattr(schedule, "MIN_TASK_S", 0.0)  # (these points are short)
    there = SweepRun(BASE, GRID, T_END, client=factory, workers=2)
    xr.testing.assert_identical(there.run(), reference)
    assert there.ran_on == "local+cluster" and calls == [1] and 1 <= there.local_points < 6
    assert there.local_points + there.cluster_points == 6
    assert client.status == "running"  # a client not started by the sweep stays open
    monkeypatch.setattr(schedule, "CLIENT_STARTUP_S", 1e9)
    given = SweepRun(BASE, GRID, T_END, client=client)
    xr.testing.assert_identical(given.run(), reference)
    assert given.ran_on == "local"


def test_an_embedded_cluster_counts_only_the_free_cores(monkeypatch):
    """On a busy machine more worker processes share the same cores: ``auto`` sizes the
    embedded cluster it weighs by the cores the load average leaves free."""
    import dynamics.sweeps.schedule as schedule

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    for load, free in [(0.3, 16), (1.0, 16), (5.0, 12), (15.4, 2), (40.0, 1)]:
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert schedule.free_cores() == free
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 12.0, 12.0))
    monkeypatch.setattr(schedule, "CLUSTER_STARTUP_S", 0.0)
    monkeypatch.setattr(schedule, "MIN_TASK_S", 0.0)
    run = SweepRun(BASE, GRID, T_END, processes=False)  # a cluster would be free to start
    run.run()
    assert run.ran_on == "local" and run.local_points == 6


def test_a_client_made_in_this_process_is_reused():
    """A default ``Client`` (one a user made, as in a notebook) runs the sweep: no
    cluster of the sweep's own is started."""
    with _cluster(2) as cluster, Client(cluster) as mine:  # the default client
        run = SweepRun(BASE, GRID, T_END, where="cluster")
        ds = run.run()
        assert run.ran_on == "cluster" and run.client is mine
        assert not [t for t in threading.enumerate() if t.name == "sweep-cluster-start"]
        assert len(cluster.workers) == 2
    xr.testing.assert_identical(ds, sweep(BASE, GRID, T_END, where="local"))


def test_where_is_checked():
    with pytest.raises(ValueError, match="where must be one of auto, local, cluster"):
        SweepRun(BASE, GRID, T_END, where="gpu")


def test_cluster_pays_once_the_work_outweighs_the_start_up():
    assert not cluster_pays(1, 10.0, 16, 0.0)     # one point: nothing to share
    assert not cluster_pays(100, 1.0, 1, 0.0)     # one worker: nothing gained
    assert not cluster_pays(10, 0.1, 2, 2.5)      # 1 s of points, 2.5 s of start-up
    assert cluster_pays(100, 0.1, 2, 2.5)         # 10 s of points: 2.5 + 5 s
    assert cluster_pays(10, 0.1, 2, 0.3)          # a running cluster: 0.3 + 0.5 s < 1 s


def test_task_sizes_follow_workers_and_cost():
    for n, threads, cost in [(1024, 16, 0.13), (64, 2, 0.2), (7, 4, 1.0), (5000, 8, 0.01)]:
        sizes = task_sizes(n, threads, cost)
        assert sum(sizes) == n and min(sizes) >= 1
        assert sizes == sorted(sizes, reverse=True)  # large first, small to finish
        assert len(sizes) >= min(n, 2 * threads)     # several tasks per worker
        assert sizes[0] <= math.ceil(n / (2 * threads))
    assert min(task_sizes(1024, 16, 0.13)) == 1 and len(task_sizes(1024, 16, 0.13)) > 64
    assert task_sizes(300, 3, 0.001) == [100, 100, 100]  # none under MIN_TASK_S = 0.1 s
    assert task_sizes(10, 2, batch_size=4) == [4, 4, 2]
    assert task_sizes(10, 2) == [3, 2, 2, 1, 1, 1]  # cost unknown: no lower bound


def test_schedule_model_on_cases_worked_by_hand():
    s = predict_schedule([1, 1, 1, 1], 1.0, 2, overhead=0.0)
    assert (s.makespan, s.efficiency, s.finish) == (2.0, 1.0, (2.0, 2.0))
    s = predict_schedule([3, 1], 1.0, 2, overhead=0.0)  # one worker idles 2 s of 6
    assert (s.makespan, s.efficiency) == (3.0, pytest.approx(4 / 6))
    s = predict_schedule([1, 1, 1, 1], 1.0, 2, startup=[0.0, 1.0], overhead=0.0)
    assert (s.makespan, s.efficiency) == (3.0, pytest.approx(4 / 5))  # 3 + 2 s there
    s = predict_schedule([2], 0.5, 1, startup=1.0, overhead=0.1)
    assert (s.makespan, s.efficiency) == (pytest.approx(2.1), pytest.approx(1 / 1.1))
    s = predict_schedule([2, 2], [1.0, 1.0, 5.0, 0.0], 2, overhead=0.0)  # per point
    assert (s.makespan, s.efficiency) == (5.0, pytest.approx(7 / 10))


def test_schedule_model_predicts_80_percent_at_16_workers_for_a_32_by_32_grid():
    """Issue #32's figures: 0.13 s a point (256 points took 41.8 s on one worker, about
    9 s of it fixed), three times that where the relaxation is stiff (γ/β > 64 on a
    0.1…10 × 0.1…100 grid), the points in the sweep's shuffled order; 16 workers ready
    one after the other 0.1 s apart after 2.5 s of start-up; 5 ms of scheduling a task.
    The sizes of :func:`task_sizes` keep every worker busy to the end."""
    n, workers, cost = 32 * 32, 16, 0.13
    beta, gamma = np.geomspace(0.1, 10, 32), np.geomspace(0.1, 100, 32)
    costs = np.where(gamma[None, :] / beta[:, None] > 64, 3 * cost, cost).ravel()
    assert 0.1 < np.mean(costs > cost) < 0.3
    costs = costs[np.random.default_rng(0).permutation(n)]
    startup = 2.5 + 0.1 * np.arange(workers)
    sizes = task_sizes(n, workers, cost)
    schedule = predict_schedule(sizes, costs, workers, startup)
    assert schedule.efficiency >= 0.8
    assert len(sizes) >= 4 * workers  # several tasks each
    # no worker idles long at the end: all finish within the last point's cost
    assert schedule.makespan - min(schedule.finish) <= 3 * cost + 1.6
    ideal = costs.sum() / workers + startup.mean()
    assert schedule.makespan <= 1.25 * ideal


@pytest.mark.slow
def test_worker_processes_give_the_same_bits(client):
    """An embedded cluster of two worker processes against the in-process one."""
    reference = sweep(BASE, GRID, t_end=T_END, client=client)
    xr.testing.assert_identical(
        sweep(BASE, GRID, t_end=T_END, workers=2, processes=True, where="cluster"), reference)


# -- the command line ----------------------------------------------------------------------
def test_cli_sweep_writes_netcdf_and_reuses_its_cache(client, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_DYNAMICS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "sweep.nc"
    argv = ["sweep", "--model", "attention", "--path", "oscillation", "--n-tokens", "4",
            "--dim", "2", "--dt", "0.02", "--grid", "beta=0.5:4:log:3", "--grid",
            "gamma=0.3,3", "--t-end", "1", "--metric", "kl_mean", "--metric", "kl_final",
            "--out", str(out), "--scheduler", client.scheduler.address, "--where", "cluster"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "\rsweep [" in first.err and "] 6/6 points\n" in first.err  # the progress bar
    assert json.loads(first.out) == {"out": str(out), "points": 6,
                                     "status": {"completed": 6}, "cached": False,
                                     "ran_on": "cluster", "local_points": 0,
                                     "cluster_points": 6}
    with xr.open_dataset(out, engine="scipy") as ds:
        ds = ds.load()
    assert set(ds.data_vars) == {"kl_mean", "kl_final", "status", "message"}
    np.testing.assert_allclose(ds["beta"].values, [0.5, math.sqrt(2), 4.0])
    _, expected = plain(BASE, {"beta": 4.0, "gamma": 3.0}, metrics=["kl_mean"])
    assert_same_bits(ds["kl_mean"].values[2, 1], expected["kl_mean"])
    assert len(os.listdir(tmp_path / "cache")) == 1
    out.unlink()
    assert main(argv) == 0
    second = capsys.readouterr()
    assert json.loads(second.out)["cached"] is True and "reused the cached sweep" in second.err
    with xr.open_dataset(out, engine="scipy") as again:
        xr.testing.assert_identical(again.load(), ds)


def test_cli_sweep_checks_its_scheduler_and_where(tmp_path, capsys):
    """``--scheduler`` that is no address: status 2; one where nothing answers: status 1;
    ``--where local`` with a scheduler: status 2. No file written."""
    out = tmp_path / "x.nc"
    argv = ["sweep", "--grid", "beta=1,2", "--t-end", "0.1", "--out", str(out), "--no-cache",
            "--quiet"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--scheduler", "nonsense"])
    assert exit_.value.code == 2 and "'nonsense' is not a scheduler address" in \
        capsys.readouterr().err
    closed = f"tcp://127.0.0.1:{_free_port()}"
    assert main([*argv, "--scheduler", closed]) == 1
    assert f"cannot reach --scheduler {closed!r}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--scheduler", closed, "--where", "local"])
    assert exit_.value.code == 2 and "--where local" in capsys.readouterr().err
    assert not out.exists()


def test_cli_sweep_bad_grid_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--grid", "beta=0.1:5000:log:4", "--out", str(tmp_path / "x.nc")])
    assert exit_.value.code == 2
    assert "beta must be in [0.001, 1000]" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


# -- a cluster started by hand -------------------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask(*args):
    exe = os.path.join(os.path.dirname(sys.executable), "dask")
    return subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    proc.stderr.close()


def _progress(err: str) -> list[int]:
    """The counts of the CLI's progress bar, in the order written."""
    return [int(k) for k in re.findall(r"\] (\d+)/\d+ points", err)]


@pytest.mark.slow
def test_cli_sweep_on_a_cluster_started_by_hand_survives_a_killed_worker(tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes (one thread each) on 127.0.0.1;
    ``python -m dynamics sweep --scheduler ADDRESS``; one worker killed while it runs a
    task of the sweep. The sweep completes: every point there once (the progress bar
    counts each point once, up to the total), each equal bit for bit to the same sweep
    run in this process; the killed worker's task was rerun on the other."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_dask("scheduler", "--host", "127.0.0.1", "--port", str(port),
                   "--dashboard-address", "127.0.0.1:0", "--no-show")]
    sweep_proc = None
    try:
        for name in ("w1", "w2"):
            procs.append(_dask("worker", address, "--nthreads", "1", "--name", name,
                               "--host", "127.0.0.1", "--no-dashboard", "--no-nanny"))
        with Client(address, timeout=60, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
            w1 = next(a for a, w in c.scheduler_info()["workers"].items() if w["name"] == "w1")
            out = tmp_path / "cli.nc"
            # 12 points of about 0.1-0.5 s each, one task each: the kill lands mid-sweep
            sweep_proc = subprocess.Popen(
                [sys.executable, "-m", "dynamics", "sweep", "--model", "attention", "--path",
                 "oscillation", "--n-tokens", "4", "--dim", "2", "--dt", "0.02", "--grid",
                 "beta=0.5:4:log:6", "--grid", "gamma=0.3,3", "--t-end", "8", "--out",
                 str(out), "--scheduler", address, "--where", "cluster", "--batch-size", "1",
                 "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONWARNINGS": "ignore"})
            deadline = time.monotonic() + 120
            held = ()
            while not held and sweep_proc.poll() is None and time.monotonic() < deadline:
                held = c.processing().get(w1, ())
                time.sleep(0.02)
            procs[1].kill()  # while w1 holds a task of the sweep
            stdout, stderr = sweep_proc.communicate(timeout=180)
            assert procs[1].wait(10) != 0  # w1 was killed, not closed
            deadline = time.monotonic() + 30
            while len(c.scheduler_info()["workers"]) > 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert [w["name"] for w in c.scheduler_info()["workers"].values()] == ["w2"]
        assert held, "w1 ran no task of the sweep before it ended"
        assert sweep_proc.returncode == 0, stderr
        summary = json.loads(stdout)
        assert summary["status"] == {"completed": 12} and summary["ran_on"] == "cluster"
        counts = _progress(stderr)
        assert counts == sorted(set(counts)) and counts[-1] == 12  # each point once
        base = Settings(model="attention", path="oscillation", n_tokens=4, dim=2, dt=0.02)
        here = SweepRun(base, dict(parse_axis(a) for a in ("beta=0.5:4:log:6", "gamma=0.3,3")),
                        t_end=8.0, where="local")
        reference = here.run()
        with xr.open_dataset(out, engine="scipy") as ds:
            for name in reference.data_vars:
                assert_same_bits(ds[name].values, reference[name].values)
    finally:
        if sweep_proc is not None and sweep_proc.poll() is None:
            sweep_proc.kill()
            sweep_proc.communicate()
        for proc in reversed(procs):
            _stop(proc)


@pytest.mark.slow
def test_ctrl_c_cancels_a_cli_sweep_and_leaves_no_worker(tmp_path):
    """SIGINT during ``python -m dynamics sweep`` on its embedded cluster of worker
    processes: exit status 130, no output file, the worker processes gone."""
    import signal

    import psutil

    out = tmp_path / "never.nc"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dynamics", "sweep", "--model", "canonical", "--grid",
         "beta=0.1:10:log:8", "--grid", "gamma=0.1:10:log:8", "--t-end", "60", "--out",
         str(out), "--workers", "2", "--batch-size", "1", "--no-cache", "--where", "cluster"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        children = []
        while time.monotonic() < deadline:  # until the workers run
            children = psutil.Process(proc.pid).children(recursive=True)
            if len(children) >= 2 and proc.poll() is None:
                time.sleep(3)
                break
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "sweep cancelled" in err
    assert not out.exists()
    gone, alive = psutil.wait_procs(children, timeout=20)
    assert alive == []


def test_a_sweep_leaves_dask_s_default_scheduler_alone(tmp_path):
    """A sweep's own cluster and client are not made dask's default: afterwards xarray's
    NetCDF files (and any dask computation of the caller) run as before. (A client left as
    the default once broke every later NetCDF export in the same process.)"""
    import dask
    import xarray as xr

    before = dask.config.get("scheduler", None)
    sweep(BASE, grid={"beta": [0.5, 1.0]}, t_end=0.1, processes=False, workers=1,
          cache=False)
    assert dask.config.get("scheduler", None) == before
    path = tmp_path / "x.nc"
    xr.Dataset({"a": ("t", [1.0, 2.0])}).to_netcdf(path, engine="scipy")
    with xr.open_dataset(path, engine="scipy") as ds:
        assert ds["a"].values.tolist() == [1.0, 2.0]
