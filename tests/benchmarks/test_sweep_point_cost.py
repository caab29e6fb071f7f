"""A sweep point's cost: only the diagnostics its metrics read (issue: exploration at scale).

Side by side in one run, interleaved, each the minimum over rounds, on one 8 × 8 grid
(canonical, N = 8, d = 4, dt = 0.01, β = 0.1…10 and γ = 0.1…100 log-spaced, t = 5,
metric ``kl_mean``; ``path="oscillation"`` is set as in the issue, the canonical model
does not read it):

- ``run_batch`` as a sweep runs it, computing the one diagnostic ``kl_mean`` reads;
- the same with every diagnostic (``diagnostics_needed`` answering True: what a point
  computed before);
- the user's loop, ``simulate`` per point and ``np.trapezoid(kl, t)/t_end``, with every
  diagnostic and with ``diagnostics=("kl",)``.

Figures (reported, not asserted): ``t(every diagnostic) / t(kl only)`` and
``t(user loop) / t(run_batch)``, per point. The metrics are checked equal first.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import dynamics.sweeps.points as points
from dynamics import Settings, simulate
from dynamics.sweeps import check_grid, grid_points, run_batch

from .conftest import record, side_by_side

BASE = Settings(model="canonical", n_tokens=8, dim=4, dt=0.01, path="oscillation")
GRID = {"beta": list(np.geomspace(0.1, 10, 8)), "gamma": list(np.geomspace(0.1, 100, 8))}
T_END, METRICS = 5.0, ["kl_mean"]
ROUNDS = int(os.environ.get("SWEEP_BENCH_ROUNDS", "3"))


def _points():
    return [(idx, {**BASE.values(), **values})
            for idx, values in grid_points(check_grid(BASE, GRID))]


def _sweep(t_end, every_diagnostic=False):
    pts = _points()

    def run():
        if not every_diagnostic:
            return run_batch(pts, t_end, METRICS)
        real = points.diagnostics_needed
        points.diagnostics_needed = lambda names: True
        try:
            return run_batch(pts, t_end, METRICS)
        finally:
            points.diagnostics_needed = real

    return run


def _user_loop(t_end, diagnostics=True):
    pts = _points()

    def run():
        out = []
        for _, values in pts:
            traj = simulate(Settings(**values), t_end=t_end, diagnostics=diagnostics)
            out.append(np.trapezoid(traj.diagnostics["kl"], traj.times) / t_end)
        return out

    return run


@pytest.mark.timeout(3600)
def test_sweep_point_computes_only_what_its_metrics_read(benchmark):
    benchmark.group = "sweep point cost"
    t_end = T_END if not benchmark.disabled else 0.05
    runs = {"kl only": _sweep(t_end), "every diagnostic": _sweep(t_end, True),
            "user loop": _user_loop(t_end), "user loop, kl only": _user_loop(t_end, ("kl",))}
    kl = [r["kl_mean"] for _, r in runs["kl only"]()]
    assert np.array_equal(kl, [r["kl_mean"] for _, r in runs["every diagnostic"]()],
                          equal_nan=True)
    assert np.allclose(kl, runs["user loop"](), rtol=1e-12, equal_nan=True)
    if benchmark.disabled:
        benchmark.pedantic(runs["kl only"], rounds=1, iterations=1)
        return
    load_before = os.getloadavg()[0]
    t = side_by_side(runs, rounds=ROUNDS, min_sample=0.0)
    benchmark.pedantic(runs["kl only"], rounds=1, iterations=1)
    n = len(_points())
    record(benchmark, "sweep point cost: 64 canonical points, t = 5, kl_mean", {
        **{f"t {name} [ms/point]": 1e3 * seconds / n for name, seconds in t.items()},
        "every diagnostic / kl only": t["every diagnostic"] / t["kl only"],
        "user loop / run_batch": t["user loop"] / t["kl only"],
        "load avg (1 min) before/after": f"{load_before:.1f}/{os.getloadavg()[0]:.1f}",
    })


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
