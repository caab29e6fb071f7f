"""Whole processes, side by side: a sweep against the plain script a user would write.

Issue #32's figures. Each side is a fresh ``python`` process (imports, start-up, the
points, the output file), timed from launch to exit; the rounds of the compared commands
are interleaved and each figure is the minimum over rounds (the least disturbed sample
on a shared machine).

- **one point**: ``python -m dynamics sweep`` of one point against a script running the
  same ``simulate`` and taking the mean of ``kl``; figure ``t_sweep − t_script``, target
  ≤ 0.5 s;
- **8 × 8** and **16 × 16** (β = 0.1 … 10, γ = 0.1 … 100, log-spaced; canonical,
  oscillation path, t_end = 5, metric ``kl_mean``): the sweep (``--where auto``, and
  forced ``local`` and ``cluster`` beside it) against the loop of ``simulate`` calls;
  figure ``t_sweep / t_loop``, targets ≤ 0.65 and ≤ 0.6.

The load average is reported beside each row: on a shared 2-core machine the cluster only
helps when cores are free. ``SWEEP_BENCH_ROUNDS`` sets the rounds (default 3); the
16 × 16 row runs with ``SWEEP_BENCH_LARGE=1`` only (minutes per round on 2 busy cores).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest

from .conftest import record

#: The loop a user would write: ``simulate`` per point, the time average of ``kl``.
USER_LOOP = """
import sys
import numpy as np
from dynamics import Settings, simulate
n, t_end = int(sys.argv[1]), float(sys.argv[2])
betas, gammas = (np.geomspace(0.1, 10, n), np.geomspace(0.1, 100, n)) if n > 1 else ([1.0], [1.0])
kl_mean = np.empty((len(betas), len(gammas)))
for i, beta in enumerate(betas):
    for j, gamma in enumerate(gammas):
        run = simulate(Settings(model="canonical", path="oscillation", beta=beta, gamma=gamma),
                       t_end=t_end)
        kl_mean[i, j] = np.trapezoid(run.diagnostics["kl"], run.times) / t_end
np.save(sys.argv[3], kl_mean)
"""

ROUNDS = int(os.environ.get("SWEEP_BENCH_ROUNDS", "3"))


def _sweep_command(n: int, t_end: float, out: str, where: str) -> list[str]:
    grid = (["--grid", "beta=1", "--grid", "gamma=1"] if n == 1 else
            ["--grid", f"beta=0.1:10:log:{n}", "--grid", f"gamma=0.1:100:log:{n}"])
    return [sys.executable, "-m", "dynamics", "sweep", "--model", "canonical", "--path",
            "oscillation", *grid, "--t-end", str(t_end), "--metric", "kl_mean", "--out", out,
            "--no-cache", "--quiet", "--where", where]


def _seconds(command: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=3600)
    return time.perf_counter() - t0


def _side_by_side(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    best = dict.fromkeys(commands, math.inf)
    for _ in range(rounds):
        for name, command in commands.items():
            best[name] = min(best[name], _seconds(command))
    return best


CASES = {"one point": (1, "difference <= 0.5 s"), "8 x 8": (8, "<= 0.65"),
         "16 x 16": (16, "<= 0.6")}


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("case", list(CASES))
def test_sweep_against_the_user_s_script(benchmark, case, tmp_path):
    n, target = CASES[case]
    benchmark.group = "sweep vs the user's script (whole processes)"
    script = tmp_path / "loop.py"
    script.write_text(USER_LOOP)
    t_end = 5.0 if not benchmark.disabled else 0.05
    if benchmark.disabled and n > 1:
        pytest.skip("untimed: the one-point case runs both commands once")
    if case == "16 x 16" and not benchmark.disabled and not os.environ.get("SWEEP_BENCH_LARGE"):
        pytest.skip("16 x 16: set SWEEP_BENCH_LARGE=1 (minutes per round)")
    loop = [sys.executable, str(script), str(n), str(t_end), str(tmp_path / "loop.npy")]
    commands = {"loop": loop}
    for where in (("auto",) if n == 1 else ("auto", "local", "cluster")):
        commands[f"sweep {where}"] = _sweep_command(n, t_end, str(tmp_path / f"{where}.nc"),
                                                    where)
    if benchmark.disabled:
        for command in commands.values():
            _seconds(command)
        benchmark.pedantic(lambda: None, rounds=1, iterations=1)
        return
    load_before = os.getloadavg()[0]
    t = _side_by_side(commands, ROUNDS)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    row = {"case": case, "points": n * n, "t_loop [s]": t["loop"]}
    for name, seconds in t.items():
        if name != "loop":
            row[f"t_{name} [s]"] = seconds
            row[f"{name}/loop"] = seconds / t["loop"]
    if n == 1:
        row["sweep - script [s]"] = t["sweep auto"] - t["loop"]
    row["target"] = target
    row["load avg before/after"] = f"{load_before:.1f}/{os.getloadavg()[0]:.1f}"
    record(benchmark, "sweep vs the user's script, whole processes (min over rounds)", row)


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
