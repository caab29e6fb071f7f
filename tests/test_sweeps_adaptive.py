"""Adaptive sweeps (``AdaptiveRun``, ``sweep(..., adaptive=N)``, ``--adaptive``): points
chosen by python-adaptive's learners, each equal bit for bit to a plain ``simulate`` of its
settings, the same points wherever they run (in process, on a real Dask cluster started
and stopped here), cached like a grid sweep.
"""

import itertools
import json
import math

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster

from dynamics import Settings, simulate, sweep
from dynamics.cli import main
from dynamics.sweeps import (
    QUIET_CLUSTER,
    AdaptiveRun,
    adaptive_sweep,
    check_ranges,
    cover_points,
    learning_value,
    parse_range,
    trajectory_metrics,
)

BASE = Settings(model="attention", path="oscillation", n_tokens=4, dim=2, dt=0.02)
RANGES = {"beta": (0.3, 3.0, "log"), "gamma": (0.1, 10.0, "log")}
T_END = 0.5
METRICS = ["kl_mean", "lag_amplitude"]


def assert_same_bits_or_nan(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f" == b.dtype.kind), (a, b)


def plain(point, metrics=METRICS):
    return trajectory_metrics(simulate(BASE.copy(**point), t_end=T_END), metrics)


def test_parse_range_reads_ranges_and_ignores_a_count():
    assert parse_range("beta=0.3:3:log") == ("beta", (0.3, 3.0, True))
    assert parse_range("beta=0.3:3:log:16") == ("beta", (0.3, 3.0, True))
    assert parse_range("gamma=0.1:10") == ("gamma", (0.1, 10.0, False))
    assert parse_range("gamma=0.1:10:8") == ("gamma", (0.1, 10.0, False))
    assert parse_range("n-tokens=1:3:lin") == ("n_tokens", (1.0, 3.0, False))
    for bad in ("beta=1,2,3", "beta", "beta=a:b", "beta=1:2:cubic"):
        with pytest.raises(ValueError):
            parse_range(bad)


def test_check_ranges_refuses_what_a_learner_cannot_sample():
    assert check_ranges({"beta": "0.3:3:log", "gamma": (0.1, 1)}) == {
        "beta": (0.3, 3.0, True), "gamma": (0.1, 1.0, False)}
    for bad, match in [({}, "one or two"), ({"beta": (1, 2), "gamma": (1, 2), "omega": (1, 2)},
                                            "one or two"),
                       ({"n_tokens": (2, 8)}, "real-valued"), ({"path": (1, 2)}, "real-valued"),
                       ({"beta": (2, 1)}, "below"), ({"beta": (0, 1, "log")}, "lo > 0")]:
        with pytest.raises(ValueError, match=match):
            check_ranges(bad)
    with pytest.raises(ValueError, match="beta must be in"):  # the settings' own bounds
        AdaptiveRun(BASE, {"beta": (0.5, 5000.0, "log")}, 8)
    with pytest.raises(ValueError, match="points must be"):
        AdaptiveRun(BASE, RANGES, 3)


def test_learning_value_gives_the_learner_a_finite_number():
    done = {"status": "completed", "diverged_at": math.nan, "blowup_time": math.nan,
            "kl_mean": 0.25, "kl_ratio_max": math.inf}
    assert learning_value("kl_mean", done, 5.0, 9.0) == 0.25
    assert learning_value("diverged_at", done, 5.0, 9.0) == 5.0     # never: the horizon
    assert learning_value("blowup_time", done, 5.0, 9.0) == 40.0    # the lab's T_LIMIT
    assert learning_value("kl_ratio_max", done, 5.0, 9.0) == 9.0    # the largest so far
    broken = {"status": "error", "kl_mean": math.nan, "diverged_at": math.nan}
    assert learning_value("kl_mean", broken, 5.0, 9.0) == 9.0
    assert learning_value("diverged_at", broken, 5.0, 9.0) == 9.0


def test_each_point_is_a_plain_simulate_and_the_points_repeat():
    run = AdaptiveRun(BASE, RANGES, 12, T_END, METRICS, round_size=4, where="local")
    ds = run.run()
    assert dict(ds.sizes) == {"point": 12} and run.ran_on == "local"
    assert set(ds.data_vars) == {"beta", "gamma", *METRICS, "status", "message"}
    assert ds.attrs["setting_path"] == "oscillation" and ds.attrs["learned"] == "kl_mean"
    assert ds.attrs["cover"] == 0.25
    assert ds.attrs["ranges"] == "beta=0.3:3.0:log; gamma=0.1:10.0:log"
    beta, gamma = ds["beta"].values, ds["gamma"].values
    assert {(0.3, 0.1), (0.3, 10.0), (3.0, 0.1), (3.0, 10.0)} <= set(zip(beta, gamma,
                                                                          strict=True))
    assert np.all((beta >= 0.3) & (beta <= 3.0) & (gamma >= 0.1) & (gamma <= 10.0))
    assert len(set(zip(beta, gamma, strict=True))) == 12
    for k in range(12):
        expected = plain({"beta": beta[k], "gamma": gamma[k]})
        for name in METRICS:
            assert_same_bits_or_nan(ds[name].values[k], expected[name])
    assert list(ds["status"].values) == ["completed"] * 12
    # the same points again, through sweep(adaptive=…); other round sizes choose others
    xr.testing.assert_identical(sweep(BASE, RANGES, T_END, METRICS, adaptive=12,
                                      round_size=4, where="local"), ds)
    other = adaptive_sweep(BASE, RANGES, 12, T_END, METRICS, round_size=1, where="local")
    assert not np.array_equal(other["beta"].values, beta)


def test_cover_points_are_a_uniform_grid_of_a_quarter_of_the_points_ends_included():
    def sides(points, bounds=((0.0, 1.0), (-2.0, 3.0))):
        cover = cover_points(list(bounds), points)
        axes = [sorted({p[i] for p in cover}) for i in range(len(bounds))]
        assert cover == [tuple(p) for p in itertools.product(*axes)]  # row-major, complete
        for axis, (lo, hi) in zip(axes, bounds, strict=True):
            assert axis[0] == lo and axis[-1] == hi                    # the ends themselves
            np.testing.assert_allclose(np.diff(axis), (hi - lo) / (len(axis) - 1))
        return [len(a) for a in axes]

    assert sides(64) == [4, 4] and sides(121) == [5, 5] and sides(256) == [8, 8]
    assert sides(32) == [3, 3] and sides(9) == [3, 3]   # at least the ends and the middle
    assert sides(8) == [2, 2] and sides(4) == [2, 2]    # no more than the points allow
    assert sides(16, [(0.0, 1.0)]) == [4] and sides(40, [(0.0, 1.0)]) == [10]
    assert sides(8, [(0.0, 1.0)]) == [3] and sides(2, [(0.0, 1.0)]) == [2]


def test_an_adaptive_sweep_starts_from_the_cover_in_log_coordinates():
    """The first 9 of 12 points: β ∈ {0.3, √0.9, 3} × γ ∈ {0.1, 1, 10} (the middles of the
    log ranges, the ends exact), the rest placed by the learner inside the cells."""
    run = AdaptiveRun(BASE, RANGES, 12, T_END, ["kl_mean"], round_size=4, where="local")
    ds = run.run()
    got = [(s["beta"], s["gamma"]) for s in run.samples[:9]]
    want = [(b, g) for b in (0.3, math.sqrt(0.9), 3.0) for g in (0.1, 1.0, 10.0)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert {g for _, g in got} >= {0.1, 10.0} and {b for b, _ in got} >= {0.3, 3.0}
    rest = set(zip(ds["beta"].values[9:], ds["gamma"].values[9:], strict=True))
    assert len(rest) == 3 and not rest & set(got)
    assert run.learner.npoints == 12
    again = AdaptiveRun(BASE, RANGES, 12, T_END, ["kl_mean"], round_size=4, where="local")
    xr.testing.assert_identical(again.run(), ds)


def test_one_setting_uses_a_line_learner_that_refines_the_steep_end():
    """``kl_mean`` over β grows much faster at large β: the learner's later points go
    there (on the log axis, more points above the geometric middle than below)."""
    run = AdaptiveRun(BASE, {"beta": (0.3, 3.0, "log")}, 16, T_END, ["kl_mean"],
                      round_size=4, where="local")
    ds = run.run()
    assert type(run.learner).__name__ == "Learner1D"
    beta = ds["beta"].values
    assert beta.min() == 0.3 and beta.max() == 3.0
    later = beta[8:]
    assert (later > math.sqrt(0.9)).sum() > (later < math.sqrt(0.9)).sum()
    k = int(np.argmax(beta))
    assert_same_bits_or_nan(ds["kl_mean"].values[k], plain({"beta": 3.0}, ["kl_mean"])[
        "kl_mean"])


def test_command_line_adaptive_sweep_on_a_real_cluster(tmp_path, monkeypatch, capsys):
    """``--adaptive`` with ``--scheduler`` of a ``LocalCluster`` started and stopped here,
    ``--where cluster``: every point ran there, the file equals the same sweep run in
    this process, bit for bit; run again, the cache answers."""
    monkeypatch.setenv("ATTENTION_DYNAMICS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "adaptive.nc"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                      **QUIET_CLUSTER) as cluster, Client(cluster, set_as_default=False) as c:
        argv = ["sweep", "--model", "attention", "--path", "oscillation", "--n-tokens", "4",
                "--dim", "2", "--dt", "0.02", "--adaptive", "10", "--round-size", "5",
                "--grid", "beta=0.3:3:log", "--grid", "gamma=0.1:10:log:8", "--t-end",
                str(T_END), "--metric", "kl_mean", "--metric", "lag_amplitude", "--out",
                str(out), "--scheduler", c.scheduler.address, "--where", "cluster"]
        assert main(argv) == 0
        first = capsys.readouterr()
        assert json.loads(first.out) == {
            "out": str(out), "points": 10, "status": {"completed": 10}, "cached": False,
            "ran_on": "cluster", "local_points": 0, "cluster_points": 10}
        assert "] 10/10 points\n" in first.err
        out.unlink()
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["ran_on"] == "cache"
    here = adaptive_sweep(BASE, RANGES, 10, T_END, METRICS, round_size=5, where="local")
    with xr.open_dataset(out, engine="scipy") as ds:
        ds = ds.load()
    assert ds.attrs["ranges"] == here.attrs["ranges"]
    for name in ("beta", "gamma", *METRICS, "status"):
        assert_same_bits_or_nan(ds[name].values, here[name].values)


def test_where_cluster_runs_even_a_tiny_adaptive_sweep_there():
    """An embedded cluster (threads) is started, waited for and closed: all points on it."""
    run = AdaptiveRun(BASE, {"gamma": (0.1, 10.0, "log")}, 3, T_END, ["kl_mean"],
                      where="cluster", workers=1, processes=False)
    ds = run.run()
    assert (run.ran_on, run.local_points, run.cluster_points) == ("cluster", 0, 3)
    assert list(ds["status"].values) == ["completed"] * 3
