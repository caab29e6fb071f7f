"""Step/model-floor ratios of two checkouts, side by side in one run.

    python scripts/bench_compare.py OLD_TREE NEW_TREE [--sizes 256 1024] [--repeats 2]

Each tree is timed in its own process (``PYTHONPATH`` set to it), alternately, each
``--repeats`` times; each process times every model's step against its model floor
(``tests/benchmarks/conftest.py``) interleaved, one BLAS thread. The table gives, per
model and size, the best ratio of each tree and new/old.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys
sys.path.insert(0, {bench!r})
from threadpoolctl import threadpool_limits
from conftest import MODEL_FLOORS, model_floor, side_by_side
from dynamics import Settings, Simulation
OVERRIDES = {{"linear": {{"value_diag": "-1"}}, "linear_accelerated": {{"value_diag": "-1"}},
             "softmax_inertial": {{"second_moment": 0.03, "dt": 1e-5}}}}
out = {{}}
with threadpool_limits(1):
    for model in {models!r}:
        for N in {sizes!r}:
            extra = OVERRIDES.get(model, {{}})
            sim = Simulation(Settings(model=model, n_tokens=N, dim=16, **extra))
            sim.advance(2)
            t = side_by_side({{"step": lambda: sim.advance(1),
                              "floor": model_floor(model, N, 16)}}, rounds=5)
            out[f"{{model}} N={{N}}"] = (t["step"] / t["floor"]
                                        if sim.status == "running" else None)
print(json.dumps(out))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=[
        "attention", "canonical", "value_matching", "cotangent_lift", "reduced", "transformer",
        "linear", "linear_accelerated", "softmax_first_order", "softmax_inertial",
        "softmax_momentum"])
    args = parser.parse_args(argv)
    code = CHILD.format(bench=str(HERE / "tests" / "benchmarks"), models=args.models,
                        sizes=args.sizes)
    best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for _ in range(args.repeats):
        for label, tree in (("old", args.old), ("new", args.new)):
            env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
            res = subprocess.run([sys.executable, "-c", code], env=env, cwd="/",
                                 capture_output=True, text=True, check=True)
            for key, ratio in json.loads(res.stdout.strip().splitlines()[-1]).items():
                if ratio is not None:
                    best[label][key] = min(best[label].get(key, ratio), ratio)
    print(f"{'model':32s} {'old':>7s} {'new':>7s} {'new/old':>8s}")
    for key in best["old"]:
        old, new = best["old"][key], best["new"].get(key)
        print(f"{key:32s} {old:7.2f} " + (f"{new:7.2f} {new / old:8.3f}" if new else "    n/a"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
