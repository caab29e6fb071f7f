"""Cost per step against N, and its fitted log-log exponent (issue item 3).

For each model the step is timed side by side with the matmul floor of the same size,
N = 8 … 1024 at d = 16. The exponent is the least-squares slope of log(cost) against
log(N) over N ≥ 256 (target ≈ 2: the O(N²d) products dominate). A slope is a ratio of
timings, so a loose sanity bound on it is asserted; no absolute time is.
"""

from __future__ import annotations

import pytest

from dynamics import Settings, Simulation

from .conftest import fit_exponent, matmul_floor, side_by_side, table_row

DIM = 16
SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
FIT_FROM = 256
MAX_EXPONENT = 2.6


def _measure(model: str, sizes, rounds: int, min_sample: float):
    """Seconds per step and per floor at each size, timed side by side."""
    step, floor = {}, {}
    for n in sizes:
        sim = Simulation(Settings(model=model, n_tokens=n, dim=DIM))
        t = side_by_side({"step": lambda sim=sim: sim.advance(1),
                          "floor": matmul_floor(n, DIM)},
                         rounds=rounds, min_sample=min_sample)
        assert sim.status == "running", sim.message
        step[n], floor[n] = t["step"], t["floor"]
    return step, floor


@pytest.mark.parametrize("model", ["canonical", "attention", "reduced"])
def test_cost_per_step_scaling(benchmark, model):
    benchmark.group = f"scaling d={DIM}"
    if benchmark.disabled:  # the same path once, on small sizes, nothing recorded
        step, floor = benchmark.pedantic(_measure, args=(model, (8, 16, 32), 1, 0.0),
                                         rounds=1, iterations=1)
        assert fit_exponent(list(step), list(step.values())) < 10
        return

    sim = Simulation(Settings(model=model, n_tokens=SIZES[-1], dim=DIM))
    benchmark.pedantic(sim.advance, args=(1,), rounds=3, iterations=1)
    step, floor = _measure(model, SIZES, rounds=5, min_sample=0.02)
    fit = [n for n in SIZES if n >= FIT_FROM]
    exponent = fit_exponent(fit, [step[n] for n in fit])
    floor_exponent = fit_exponent(fit, [floor[n] for n in fit])
    small = [n for n in SIZES if n <= 64]
    for n in SIZES:
        table_row(f"cost per step vs N (d={DIM})", {
            "model": model, "N": n, "step/floor": step[n] / floor[n],
            f"step/step(N={FIT_FROM})": step[n] / step[FIT_FROM],
        })
    table_row(f"fitted log-log exponent of cost per step (fit over N >= {FIT_FROM})", {
        "model": model, "exponent": exponent, "floor exponent": floor_exponent,
        "exponent over N <= 64": fit_exponent(small, [step[n] for n in small]),
    })
    benchmark.extra_info.update({
        "exponent": exponent, "floor_exponent": floor_exponent,
        "step_over_floor": {str(n): step[n] / floor[n] for n in SIZES},
        "step_seconds": {str(n): step[n] for n in SIZES},
    })
    assert exponent < MAX_EXPONENT, f"{model}: cost grows like N^{exponent:.2f}"
