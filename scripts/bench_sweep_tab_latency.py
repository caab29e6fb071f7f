"""The Sweep tab's first-sweep latency (issue #32): time to the first cell and to the whole
map of the tab's default sweep (8 × 8, β = 0.3 … 3, γ = 0.1 … 10, ``kl_mean``, t_end = 5,
attention on the oscillation path), run as the tab runs it: its process's shared cluster
(``app.sweeps.sweep_tab.shared_client``) given to a :class:`dynamics.SweepRun`, then a second sweep
on the warm cluster.

    .venv/bin/python scripts/bench_sweep_tab_latency.py          # as the tab does today:
                                                                  # the cluster started first
    .venv/bin/python scripts/bench_sweep_tab_latency.py --lazy   # shared_client given
                                                                  # uncalled: started only
                                                                  # if it pays, in a thread
"""

import argparse
import time

import scipy.linalg  # noqa: F401 (loads SciPy's BLAS before the limit below)
from threadpoolctl import threadpool_limits

from app.sweeps.sweep_tab import axis_values, shared_client
from dynamics import Settings, SweepRun


def one(label: str, lazy: bool) -> None:
    t0, first = time.perf_counter(), []
    grid = {"beta": axis_values(0.3, 3.0, 8, True), "gamma": axis_values(0.1, 10.0, 8, True)}
    run = SweepRun(Settings(model="attention", path="oscillation"), grid, 5.0, ["kl_mean"],
                   on_batch=lambda *_: first or first.append(time.perf_counter() - t0))
    run.client = shared_client if lazy else shared_client()
    ready = time.perf_counter() - t0
    run.run()
    print(f"{label}: client ready {ready:.2f} s, first cell {first[0]:.2f} s, map "
          f"{time.perf_counter() - t0:.2f} s, ran on {run.ran_on}, {run.local_points} "
          "points here", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lazy", action="store_true",
                        help="give shared_client uncalled (a one-line change in the tab)")
    args = parser.parse_args()
    threadpool_limits(1)
    one("first sweep (cold cluster)", args.lazy)
    one("second sweep (warm cluster)", args.lazy)
