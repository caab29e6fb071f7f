"""Profile one dashboard tick per Part I model: ``python scripts/profile_frame.py``.

A tick is what the dashboard's periodic callback does: advance a few steps, then build
the diagnostics frame. For each model (N = 64, d = 16 by default, one BLAS thread) it
prints the cProfile statistics of the ticks sorted by cumulative time (top 15) and the
split of a tick between stepping and building the frame.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from threadpoolctl import threadpool_limits

from dynamics import PART_I_MODELS, Settings, Simulation


def split(sim: Simulation, steps: int, ticks: int) -> tuple[float, float]:
    """Seconds per tick spent in ``advance(steps)`` and in ``frame()`` (minimum over ticks)."""
    step = frame = float("inf")
    for _ in range(ticks):
        t0 = time.perf_counter()
        sim.advance(steps)
        t1 = time.perf_counter()
        sim.frame()
        t2 = time.perf_counter()
        step, frame = min(step, t1 - t0), min(frame, t2 - t1)
    return step, frame


def profile(sim: Simulation, steps: int, ticks: int, top: int) -> str:
    """The cProfile table of ``ticks`` ticks, sorted by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(ticks):
        sim.advance(steps)
        sim.frame()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-tokens", type=int, default=64)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5, help="steps per tick")
    parser.add_argument("--ticks", type=int, default=20, help="ticks profiled and timed")
    parser.add_argument("--top", type=int, default=15, help="rows of each profile")
    parser.add_argument("--models", nargs="*", default=list(PART_I_MODELS),
                        choices=list(PART_I_MODELS))
    args = parser.parse_args(argv)

    rows = []
    with threadpool_limits(1):
        for model in args.models:
            sim = Simulation(Settings(model=model, n_tokens=args.n_tokens, dim=args.dim))
            sim.advance(args.steps)  # warm-up
            sim.frame()
            print(f"\n{'=' * 30} {model}: N={args.n_tokens}, d={args.dim}, "
                  f"{args.ticks} ticks of advance({args.steps}) + frame() {'=' * 30}")
            print(profile(sim, args.steps, args.ticks, args.top))
            step, frame = split(sim, args.steps, args.ticks)
            rows.append((model, step, frame, sim.status))

    print(f"\nsplit of one tick = advance({args.steps}) + frame(), minimum over "
          f"{args.ticks} ticks (ms only as a guide; the ratios are the figures)")
    print(f"{'model':>15} {'step share':>10} {'frame share':>11} {'frame/step':>10} "
          f"{'tick ms':>8} status")
    for model, step, frame, status in rows:
        tick = step + frame
        print(f"{model:>15} {step / tick:>10.0%} {frame / tick:>11.0%} "
              f"{frame / (step / args.steps):>10.2f} {1e3 * tick:>8.2f} {status}")


if __name__ == "__main__":
    main()
