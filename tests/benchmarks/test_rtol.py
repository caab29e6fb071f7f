"""``simulate(rtol=...)`` against ``solve_ivp`` at matched final accuracy (issue 17, item 1).

The set-up of ``test_solve_ivp.py`` (canonical, N = 8, d = 4, t_end = 2, stiff γ/β = 1000
and non-stiff γ/β = 1, the same tight references) at two targets, ``max|X − X_ref|`` at
most 1e-4 and 1e-6. Every side walks an rtol ladder (1e-2 … 1e-10, four per decade)
from coarse to fine up to two rungs past the first one reaching the target; all passing
rungs are timed side by side, interleaved, and each side's figure is its fastest one.
``simulate(rtol)`` is also compared with the fixed-step ``simulate`` (its dt ladder).
The figure is ``t_method / t_simulate(rtol)``. Targets, reported not asserted:
non-stiff ≥ 1 against RK45, DOP853 and LSODA; stiff ≥ 20 against RK45, > 1 against
Radau and LSODA.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import simulate

from .conftest import table_row
from .test_solve_ivp import (
    DT_LADDER,
    ROUNDS,
    T_END,
    _fastest,
    _ivp_run,
    _reference,
    _settings,
    _simulate_run,
    _walk,
)

TARGETS = (1e-4, 1e-6)
RTOL_LADDER = tuple(10.0 ** (-2 - k / 4) for k in range(33))
#: Finer fixed steps for the 1e-6 target (dt = 2/n, n up to 3200 in ratios 2^(1/6)).
FINE_DT_LADDER = tuple(T_END / n for n in sorted({round(50 * 2 ** (k / 6)) for k in range(37)}))
METHODS = ("RK45", "DOP853", "Radau", "LSODA")
SPEEDUP_TARGETS = {"non-stiff": {"RK45": 1.0, "DOP853": 1.0, "LSODA": 1.0},
                   "stiff": {"RK45": 20.0, "Radau": 1.0, "LSODA": 1.0}}


def _rtol_run(settings, rtol, t_end):
    def run():
        traj = simulate(settings, t_end, every=10**9, rtol=rtol)
        assert traj.status == "running", traj.message
        return traj.features[-1]

    return run


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("regime", ["non-stiff", "stiff"])
def test_simulate_rtol_vs_solve_ivp(benchmark, regime, target):
    settings = _settings(regime)
    benchmark.group = "simulate(rtol) vs solve_ivp"
    if benchmark.disabled:  # one short run of the code path
        X_ref = _reference(settings, regime, 0.2, tight=False)
        X = benchmark.pedantic(_rtol_run(settings, 1e-4, 0.2), rounds=1, iterations=1)
        assert np.max(np.abs(X - X_ref)) < 1e-3
        return

    X_ref = _reference(settings, regime, T_END)
    passing, rungs = {}, {}
    passing["rtol"], rungs["rtol"] = _walk(
        [(f"rtol={r:.2g}", _rtol_run(settings, r, T_END)) for r in RTOL_LADDER], X_ref, target)
    ladder = DT_LADDER if target >= 1e-4 else FINE_DT_LADDER
    passing["fixed dt"], rungs["fixed dt"] = _walk(
        [(f"dt={dt:.4g}", _simulate_run(settings, dt, T_END)) for dt in ladder], X_ref, target)
    for method in METHODS:
        if regime == "stiff" and method == "DOP853":
            continue  # explicit and order 8: thousands of steps, no contender
        passing[method], rungs[method] = _walk(
            [(f"rtol={r:.2g}", _ivp_run(settings, method, r, T_END)) for r in RTOL_LADDER],
            X_ref, target)
    assert passing["rtol"], f"simulate(rtol) never reached {target:g}: {rungs['rtol']}"
    fastest = _fastest(passing, rounds=ROUNDS)
    t = {name: f[1] for name, f in fastest.items()}
    benchmark.pedantic(fastest["rtol"][0][1], rounds=3, iterations=1)
    benchmark.extra_info["ladders"] = {
        name: [{"config": c, "error": e, "seconds_once": s} for c, e, s in r]
        for name, r in rungs.items()}
    targets = SPEEDUP_TARGETS[regime]
    for name in passing:
        best = fastest.get(name)
        speedup = t[name] / t["rtol"] if best is not None else float("nan")
        row = {
            "regime": regime, "target": f"{target:g}", "method": name,
            "config": best[0][0] if best is not None else "not reached",
            "error": best[0][2] if best is not None else float("nan"),
            "t/t_rtol": speedup,
            "wanted": f">= {targets[name]:g}" if name in targets else "-",
            "met": ("yes" if speedup >= targets[name] else "NO") if name in targets else "-",
        }
        table_row("simulate(rtol) vs solve_ivp at max|X - X_ref| <= target", row)
        benchmark.extra_info[f"speedup_vs_{name}"] = speedup
        benchmark.extra_info[f"config_{name}"] = row["config"]
