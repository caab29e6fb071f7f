"""Throughput of ``simulate_batch`` against the same runs one by one (issue 17, item 2).

64 canonical runs at N = 8, d = 4 (different seeds, β, γ), t_end = 10 at dt = 0.01,
a frame every 100 steps: one ``simulate_batch`` call against 64 ``simulate`` calls,
timed side by side (interleaved rounds, minimum of each). The figure is
``t_sequential / t_batch`` (target ≥ 10, reported, not asserted); the results are
checked bit-identical in the same run.
"""

from __future__ import annotations

import numpy as np

from dynamics import Settings, simulate
from dynamics.batch import simulate_batch

from .conftest import record, side_by_side

N, DIM, RUNS, T_END, EVERY = 8, 4, 64, 10.0, 100


def _runs(n=RUNS):
    return [Settings(model="canonical", n_tokens=N, dim=DIM, seed=i, beta=1.0 + 0.02 * i,
                     gamma=0.5 + 0.01 * i) for i in range(n)]


def test_batch_throughput(benchmark):
    benchmark.group = "simulate_batch"
    runs = _runs() if not benchmark.disabled else _runs(4)
    t_end = T_END if not benchmark.disabled else 0.2
    batch = benchmark.pedantic(lambda: simulate_batch(runs, t_end, EVERY), rounds=1,
                               iterations=1)
    alone = [simulate(s, t_end, EVERY) for s in runs]
    for a, b in zip(batch, alone, strict=True):
        assert np.array_equal(a.features, b.features)
        assert np.array_equal(a.attention, b.attention)
    if benchmark.disabled:
        return
    t = side_by_side({"batch": lambda: simulate_batch(runs, T_END, EVERY),
                      "sequential": lambda: [simulate(s, T_END, EVERY) for s in runs]},
                     rounds=3, min_sample=0.0)
    steps = RUNS * round(T_END / runs[0].dt)
    record(benchmark, "simulate_batch: 64 canonical runs at N = 8", {
        "runs": RUNS, "N": N, "steps per run": round(T_END / runs[0].dt),
        "batch s": t["batch"], "sequential s": t["sequential"],
        "run-steps/s batch": steps / t["batch"],
        "run-steps/s sequential": steps / t["sequential"],
        "t_seq/t_batch": t["sequential"] / t["batch"], "target": ">= 10",
        "met": "yes" if t["sequential"] / t["batch"] >= 10 else "NO"})
