"""``simulate`` against ``scipy.integrate.solve_ivp`` at matched final accuracy (item 2).

Canonical model, N = 8, d = 4, t_end = 2, default seed, in a stiff (γ/β = 1000) and a
non-stiff (γ/β = 1) regime. The final features of each configuration are compared
with a tight reference (Radau rtol 1e-11 when stiff, DOP853 rtol 1e-12 otherwise);
for ``simulate`` a ladder of steps dt and for RK45/Radau/LSODA a ladder of rtol is
walked from coarse to fine until the error ``max|X - X_ref|`` is at most 1e-4 (and
two rungs further). Every rung of every method that reaches it is then timed side by
side, interleaved over several rounds (minimum of each); each method's figure is its
fastest rung, so no side's configuration rests on one noisy timing. The figure is
``t_method / t_simulate`` (the speed-up of ``simulate``). Targets, reported not
asserted: stiff ≥ 20 against RK45 and > 1 against Radau and LSODA; non-stiff only
reported.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from dynamics import Settings, simulate
from dynamics.reference import solve_reference

from .conftest import side_by_side, table_row

N, DIM, T_END = 8, 4, 2.0
TARGET_ERROR = 1e-4
REGIMES = {"stiff": {"gamma": 1000.0, "beta": 1.0}, "non-stiff": {"gamma": 1.0, "beta": 1.0}}
#: Rungs about 12 % apart in cost on both sides, so each side's cheapest passing rung lies
#: within 12 % of the cost that just reaches the target. simulate: dt = t_end/n, n from 50
#: to 400 in ratios 2^(1/6) (an integer n ends the run exactly at t_end; cost ∝ n).
#: solve_ivp: rtol from 1e-2 to 1e-9, four per decade (its order-5 methods cost about
#: rtol^(−1/5), so a factor 10^(1/4) in rtol is the same 2^(1/6) in cost).
DT_LADDER = tuple(T_END / n for n in sorted({round(50 * 2 ** (k / 6)) for k in range(19)}))
RTOL_LADDER = tuple(10.0 ** (-2 - k / 4) for k in range(29))
METHODS = ("RK45", "Radau", "LSODA")
#: Passing rungs tried beyond the first one (the cost is not always monotone in rtol).
EXTRA_RUNGS = 2
#: Interleaved rounds of the side-by-side timing of the passing rungs (minimum of each).
ROUNDS = 5
SPEEDUP_TARGETS = {"stiff": {"RK45": 20.0, "Radau": 1.0, "LSODA": 1.0}}


def _settings(regime: str) -> Settings:
    return Settings(model="canonical", n_tokens=N, dim=DIM, **REGIMES[regime])


def _reference(settings: Settings, regime: str, t_end: float, tight: bool = True):
    if regime == "stiff":
        rtol, atol, method = (1e-11, 1e-12, "Radau") if tight else (1e-8, 1e-10, "Radau")
    else:
        rtol, atol, method = (1e-12, 1e-12, "DOP853") if tight else (1e-9, 1e-11, "DOP853")
    sol, unpack = solve_reference(settings, t_end, method=method, rtol=rtol, atol=atol)
    assert sol.success, sol.message
    return unpack(sol.y[:, -1])["X"]


def _simulate_run(settings: Settings, dt: float, t_end: float):
    s = settings.copy(dt=dt)
    n_steps = max(1, int(round(t_end / dt)))

    def run():
        traj = simulate(s, t_end, every=n_steps)
        assert traj.status == "running", traj.message
        return traj.features[-1]

    return run


def _ivp_run(settings: Settings, method: str, rtol: float, t_end: float):
    def run():
        sol, unpack = solve_reference(settings, t_end, method=method, rtol=rtol,
                                      atol=1e-2 * rtol)
        assert sol.success, sol.message
        return unpack(sol.y[:, -1])["X"]

    return run


def _walk(ladder, X_ref, target=TARGET_ERROR):
    """Run each ``(config, run)`` once, coarse to fine, up to ``EXTRA_RUNGS`` rungs past
    the first one reaching ``target`` (max abs error of the features).

    Returns ``(passing, rungs)``: ``passing`` the ``(config, run, error)`` of every rung
    reaching the target (empty if none), ``rungs`` the ``(config, error, seconds)`` of
    every rung run. Which passing rung is fastest is decided by timing them all side by
    side (:func:`_fastest`), not from these single timings.
    """
    rungs, passing = [], []
    for config, run in ladder:
        t0 = time.perf_counter()
        X = run()
        seconds = time.perf_counter() - t0
        error = float(np.max(np.abs(X - X_ref)))
        rungs.append((config, error, seconds))
        if error <= target:
            passing.append((config, run, error))
            if len(passing) > EXTRA_RUNGS:
                break
    return passing, rungs


def _fastest(passing: dict, rounds: int):
    """Time every passing rung of every method side by side (interleaved rounds, the
    minimum of each); per method its fastest rung ``(config, run, error)`` and seconds."""
    fns = {(name, i): p[1] for name, ps in passing.items() for i, p in enumerate(ps)}
    t = side_by_side(fns, rounds=rounds, min_sample=0.0)
    best = {}
    for name, ps in passing.items():
        if ps:
            i = min(range(len(ps)), key=lambda i: t[(name, i)])
            best[name] = (ps[i], t[(name, i)])
    return best


@pytest.mark.parametrize("regime", list(REGIMES))
def test_simulate_vs_solve_ivp(benchmark, regime):
    settings = _settings(regime)
    benchmark.group = "simulate vs solve_ivp"
    if benchmark.disabled:  # one short run of every code path, no ladders
        t_end = 0.2
        X_ref = _reference(settings, regime, t_end, tight=False)
        X = benchmark.pedantic(_simulate_run(settings, 0.02, t_end), rounds=1, iterations=1)
        assert np.max(np.abs(X - X_ref)) < 1e-2
        for method in METHODS:
            X = _ivp_run(settings, method, 1e-3, t_end)()
            assert np.max(np.abs(X - X_ref)) < 1e-2
        return

    X_ref = _reference(settings, regime, T_END)
    passing, rungs = {}, {}
    passing["simulate"], rungs["simulate"] = _walk(
        [(f"dt={dt:.4g}", _simulate_run(settings, dt, T_END)) for dt in DT_LADDER], X_ref)
    for method in METHODS:
        passing[method], rungs[method] = _walk(
            [(f"rtol={r:.2g}", _ivp_run(settings, method, r, T_END)) for r in RTOL_LADDER],
            X_ref)
    assert passing["simulate"], f"simulate never reached {TARGET_ERROR:g}: {rungs}"
    # every passing rung of every method, timed side by side: the configuration of each
    # side is its fastest rung over interleaved rounds, never one noisy single timing
    fastest = _fastest(passing, rounds=ROUNDS)
    best = {name: fastest[name][0] if name in fastest else None for name in passing}
    t = {name: f[1] for name, f in fastest.items()}
    benchmark.pedantic(best["simulate"][1], rounds=3, iterations=1)

    benchmark.extra_info["ladders"] = {
        name: [{"config": c, "error": e, "seconds_once": s} for c, e, s in r]
        for name, r in rungs.items()
    }
    targets = SPEEDUP_TARGETS.get(regime, {})
    for name in ("simulate", *METHODS):
        b = best[name]
        speedup = t[name] / t["simulate"] if b is not None else float("nan")
        row = {
            "regime": regime, "method": name,
            "config": b[0] if b is not None else "not reached",
            "error": b[2] if b is not None else float("nan"),
            "t/t_simulate": speedup,
            "target": f">= {targets[name]:g}" if name in targets else "-",
            "met": ("yes" if speedup >= targets[name] else "NO") if name in targets else "-",
        }
        table_row(f"simulate vs solve_ivp at max|X - X_ref| <= {TARGET_ERROR:g}", row)
        benchmark.extra_info[f"speedup_vs_{name}"] = speedup
        benchmark.extra_info[f"config_{name}"] = row["config"]
        benchmark.extra_info[f"error_{name}"] = row["error"]

