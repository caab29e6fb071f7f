"""Record and compare golden outputs of every model, for refactors that must not change
results.

    python scripts/golden.py record DIR      # every model, two settings, two chunkings
    python scripts/golden.py compare OLD NEW # max relative difference per model

Each run writes the diagnostics CSV and the final features, momenta and attention
(``.npz``). Two chunkings (``every`` = 1 and 7) of the same settings must agree too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dynamics import MODELS, Settings, simulate

#: Two settings per model: the defaults, and a stiffer or larger second one.
CASES = {
    "a": {},
    "b": {"beta": 3.0, "gamma": 40.0, "n_tokens": 12, "dim": 3, "seed": 5, "dt": 0.02,
          "init_attention": "random", "init_momentum": "random", "path": "switch",
          "alpha": 0.5, "second_moment": 0.2, "value_diag": "1.5", "kernel_diag": "0.8",
          "matrix_draw": "random"},
}
T_END = 1.0
CHUNKS = (1, 7)


def _settings(model, case):
    values = dict(CASES[case], model=model)
    names = Settings.names()
    return Settings(**{k: v for k, v in values.items() if k in names})


def record(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for model in MODELS:
        for case in CASES:
            for every in CHUNKS:
                run = simulate(_settings(model, case), t_end=T_END, every=every)
                stem = folder / f"{model}-{case}-{every}"
                run.to_csv(f"{stem}.csv")
                arrays = {"X": run.features[-1], "P": run.momenta[-1]}
                if run.attention is not None:
                    arrays["A"] = run.attention[-1]
                np.savez(f"{stem}.npz", **arrays)
                Path(f"{stem}.json").write_text(json.dumps(
                    {"status": run.status, "message": run.message}))
        _record_quench(model, folder)


def _record_quench(model, folder: Path) -> None:
    """A run whose energy settings change twice mid-run (a quench, then γ and k)."""
    import pandas as pd

    from dynamics import Simulation

    settings = _settings(model, "a")
    sim = Simulation(settings)
    rows = [sim.frame().diagnostics]
    for change in ({"beta": 2.5}, {"gamma": 3.0, "confinement": 3.0, "alpha": 2.0}):
        for _ in range(5):
            rows.append(sim.step(10).diagnostics)
        settings.param.update(change)
    for _ in range(5):
        rows.append(sim.step(10).diagnostics)
    frame = sim.frame()
    stem = folder / f"{model}-q-1"
    pd.DataFrame(rows).to_csv(f"{stem}.csv", index=False, float_format="%.17g")
    arrays = {"X": frame.features, "P": frame.momenta}
    if frame.attention is not None:
        arrays["A"] = frame.attention
    np.savez(f"{stem}.npz", **arrays)


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("inf")
    both_nan = np.isnan(a) & np.isnan(b)
    scale = np.maximum(np.abs(a), np.abs(b))
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.where(scale > 1e-300, scale, 1.0))
    return float(np.max(rel)) if rel.size else 0.0


def compare(old: Path, new: Path) -> int:
    import pandas as pd

    worst_all = 0.0
    for model in MODELS:
        worst = 0.0
        for case, every in [(c, e) for c in CASES for e in CHUNKS] + [("q", 1)]:
            if True:
                stem = f"{model}-{case}-{every}"
                a, b = pd.read_csv(old / f"{stem}.csv"), pd.read_csv(new / f"{stem}.csv")
                cols = [c for c in a.columns]
                # a column added since the recording must vanish on the recorded runs
                # (a new term, e.g. noise_work, that is 0 on their settings)
                added = [c for c in b.columns if c not in cols]
                if [c for c in b.columns if c in cols] != cols or any(
                        (b[c] != 0).any() for c in added):
                    print(f"{stem}: columns differ {list(a.columns)} vs {list(b.columns)}")
                    worst = float("inf")
                    continue
                worst = max(worst, _rel(a[cols].to_numpy(), b[cols].to_numpy()))
                za, zb = np.load(old / f"{stem}.npz"), np.load(new / f"{stem}.npz")
                for key in za.files:
                    worst = max(worst, _rel(za[key], zb[key]) if key in zb.files
                                else float("inf"))
        print(f"{model:22s} max relative difference {worst:.3g}")
        worst_all = max(worst_all, worst)
    return 0 if worst_all <= 1e-13 else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("record").add_argument("folder", type=Path)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("old", type=Path)
    cmp_.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.folder)
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
