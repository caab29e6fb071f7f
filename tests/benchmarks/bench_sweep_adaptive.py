"""Adaptive against uniform sweeps: the root-mean-square error of the interpolated map
against a dense 32 × 32 reference, at 64, 121 and 256 points, on two maps (a script, not
a timed test; the figures are in tests/benchmarks/README.md).

* **lag** — the shipped example's metric (``lag_amplitude`` of the attention-only model on
  the oscillation path over β × γ, log axes), at ``t_end = 2.5`` and ``dt = 0.02`` (the
  example's ``t_end = 5`` and ``dt = 0.01`` cost 0.5 s a point: the 1 700 points would
  take a quarter of an hour on two shared cores);
* **blow-up** — a sharp boundary: the blow-up time of Part II's accelerated moment system
  (``blowup_time`` of ``linear_accelerated``) over the damping α × the initial second
  moment s0, log axes; where no blow-up comes before the lab's horizon (α large, s0
  small) the value is the horizon, 40 (as the adaptive learner is told,
  :func:`dynamics.sweeps.learning_value`): a wall between the two regimes.

Every map is interpolated the same way: linearly on the Delaunay triangles of its points
in the axes' log coordinates (as the Sweep tab draws an adaptive map). An adaptive sweep's
first round, its uniform cover, depends on its number of points N
(:func:`dynamics.sweeps.cover_points`): each N of ``ADAPTIVE`` is a run of its own (rounds
of 8, the default), and the adaptive points needed for an error are interpolated in
log-log between those runs (the fewest measured whose error is at most it, and the
interpolated figure). The uniform grids are 6 × 6, 8 × 8, 11 × 11 and 16 × 16: the uniform
points needed for an error are interpolated in log-log between them (extrapolated past
16 × 16 by the last two).

Run: ``python tests/benchmarks/bench_sweep_adaptive.py`` (every sweep is cached in
``$ATTENTION_DYNAMICS_CACHE``, by default ``/tmp/adaptive-bench-cache``: a second run
only interpolates).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

os.environ.setdefault("ATTENTION_DYNAMICS_CACHE", "/tmp/adaptive-bench-cache")

from scipy.interpolate import LinearNDInterpolator  # noqa: E402

from dynamics import Settings  # noqa: E402
from dynamics.sweeps import adaptive_sweep, learning_value, sweep  # noqa: E402

MAPS = {
    "lag": {"base": Settings(model="attention", path="oscillation", dt=0.02),
            "ranges": {"beta": (0.3, 3.0), "gamma": (0.1, 10.0)},
            "metric": "lag_amplitude", "t_end": 2.5},
    "blow-up": {"base": Settings(model="linear_accelerated"),
                "ranges": {"alpha": (0.1, 10.0), "second_moment": (0.02, 2.0)},
                "metric": "blowup_time", "t_end": 0.01},
}
REFERENCE = 32
SIDES = (6, 8, 11, 16)
BUDGETS = (64, 121, 256)
#: The adaptive runs (each its own sweep): the budgets, their halves, and between.
ADAPTIVE = (32, 48, 60, 64, 90, 121, 128, 180, 256)


def grid(ranges, n):
    return {k: np.geomspace(lo, hi, n).tolist() for k, (lo, hi) in ranges.items()}


def values(ds, metric, t_end):
    """The map's values as the learner sees them (finite: a blow-up that never came is
    the horizon), flattened with the points' log coordinates."""
    names = [n for n in ds.attrs["swept"].split(", ")]
    if "point" in ds.dims:
        coords = [np.log10(ds[n].values) for n in names]
        raw = ds[metric].values
        status = ds["status"].values
    else:
        mesh = np.meshgrid(*[np.log10(ds[n].values) for n in names], indexing="ij")
        coords = [m.ravel() for m in mesh]
        raw, status = ds[metric].values.ravel(), ds["status"].values.ravel()
    top = float(np.nanmax(np.where(np.isfinite(raw), raw, np.nan)))
    z = np.array([learning_value(metric, {metric: v, "status": s}, t_end, top)
                  for v, s in zip(raw, status, strict=True)])
    return np.column_stack(coords), z


def rms(points, z, ref_points, ref_z, lo, hi):
    ip = LinearNDInterpolator((points - lo) / (hi - lo), z)
    got = ip((ref_points - lo) / (hi - lo))
    return float(np.sqrt(np.mean((got - ref_z) ** 2)))


def uniform_needed(uniform: dict, err: float) -> float:
    """Uniform points for the RMS error ``err``: log-log interpolation between the grids
    measured, past the largest the last two grids' power law."""
    nu = np.array(sorted(uniform), dtype=float)
    eu = np.array([uniform[n] for n in sorted(uniform)])
    if err < eu[-1]:
        slope = np.log(nu[-1] / nu[-2]) / np.log(eu[-1] / eu[-2])
        return float(nu[-1] * (err / eu[-1]) ** slope)
    order = np.argsort(eu)
    return float(np.exp(np.interp(np.log(err), np.log(eu[order]), np.log(nu[order]))))


def adaptive_needed(adaptive: dict, err: float) -> tuple[int | None, float]:
    """Adaptive points for the RMS error ``err``: the fewest measured whose map's error is
    at most ``err`` (None if none), and the log-log interpolation between the runs."""
    fewest = next((n for n in sorted(adaptive) if adaptive[n] <= err), None)
    return fewest, uniform_needed(adaptive, err)


def main():
    for name, spec in MAPS.items():
        base, ranges, metric, t_end = (spec[k] for k in ("base", "ranges", "metric", "t_end"))
        common = {"metrics": [metric], "where": "local", "cache": True}
        t0 = time.perf_counter()
        ref = sweep(base, grid(ranges, REFERENCE), t_end, **common)
        print(f"[{name}] reference {REFERENCE}x{REFERENCE}: {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
        ref_points, ref_z = values(ref, metric, t_end)
        lo, hi = ref_points.min(axis=0), ref_points.max(axis=0)
        span = float(ref_z.max() - ref_z.min())
        uniform = {}
        for n in SIDES:
            ds = sweep(base, grid(ranges, n), t_end, **common)
            uniform[n * n] = rms(*values(ds, metric, t_end), ref_points, ref_z, lo, hi)
        adaptive = {}
        for n in ADAPTIVE:
            t0 = time.perf_counter()
            ds = adaptive_sweep(base, {k: (a, b, "log") for k, (a, b) in ranges.items()},
                                n, t_end, **common)
            print(f"[{name}] adaptive {n}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)
            adaptive[n] = rms(*values(ds, metric, t_end), ref_points, ref_z, lo, hi)
        print(f"\n### {name}: {metric} (range of the reference {span:.4g})\n")
        print("| points | uniform RMS | adaptive RMS | adaptive / uniform | adaptive points for "
              "the uniform error (fewest run; interpolated) | uniform points for the adaptive "
              "error |")
        print("|---|---|---|---|---|---|")
        for n in BUDGETS:
            fewest, interp = adaptive_needed(adaptive, uniform[n])
            print(f"| {n} | {uniform[n]:.4g} | {adaptive[n]:.4g} | "
                  f"{adaptive[n] / uniform[n]:.2f} | {fewest}; ≈ {interp:.0f} | "
                  f"≈ {uniform_needed(uniform, adaptive[n]):.0f} |")
        print("\nuniform grids: " + ", ".join(f"{n}: {e:.4g}" for n, e in uniform.items()))
        print("adaptive runs: " + ", ".join(f"{n}: {e:.4g}" for n, e in adaptive.items()),
              flush=True)


if __name__ == "__main__":
    main()
