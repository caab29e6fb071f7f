"""Shared machinery of the backend benchmarks: one BLAS thread, side-by-side timing, tables.

Every speed figure is a ratio of two timings taken in the same run, interleaved round
by round, each the minimum over rounds (the least disturbed sample on a shared
machine). Nothing here asserts an absolute time.

Two floors: :func:`matmul_floor`, the same three products for every model, and
:func:`model_floor`, the products each model's scheme performs in one step
(:data:`MODEL_FLOORS`, documented per model in README.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

#: Rows of the ratio tables printed at the end of a timed run, by table title.
TABLES: dict[str, list[dict]] = {}


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """One BLAS thread: multi-threaded OpenBLAS on a busy 2-core box is ~30x slower."""
    with threadpool_limits(1):
        yield


def side_by_side(fns: dict[str, Callable[[], object]], rounds: int = 5,
                 min_sample: float = 0.02) -> dict[str, float]:
    """Seconds per call of each function, timed interleaved; minimum over ``rounds``.

    Each sample repeats a call until it lasts about ``min_sample`` seconds, so the
    timer resolution and per-sample noise stay small for the fast calls.
    """
    repeats = {}
    for name, fn in fns.items():  # one warm-up call, which also sizes the sample
        t0 = time.perf_counter()
        fn()
        repeats[name] = max(1, min(1000, math.ceil(min_sample / max(time.perf_counter() - t0,
                                                                    1e-7))))
    best = dict.fromkeys(fns, math.inf)
    for _ in range(rounds):
        for name, fn in fns.items():
            n = repeats[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return best


def step_times(benchmark, sims: dict, timed: str, rounds: int) -> dict[str, float] | None:
    """Seconds per step of each simulation of ``sims``, timed side by side; None in the
    untimed run. ``benchmark`` records ``rounds`` steps of ``sims[timed]``; every run must
    still be running after them."""
    benchmark.pedantic(sims[timed].advance, args=(1,), rounds=rounds, iterations=1)
    assert all(sim.status == "running" for sim in sims.values())
    if benchmark.disabled:
        return None
    return side_by_side({name: (lambda s=sim: s.advance(1)) for name, sim in sims.items()},
                        rounds=rounds)


def matmul_floor(N: int, d: int, seed: int = 0) -> Callable[[], object]:
    """The generic floor: the bare O(N²d) products of one step on arrays of its size.

    One score product ``(X M) Xᵀ`` plus one force ``A (X Mᵀ) + Aᵀ (X M)``, the same
    for every model (:func:`model_floor` times the products each scheme performs).
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d))
    M = rng.standard_normal((d, d)) / np.sqrt(d)
    A = rng.random((N, N))
    A /= A.sum(axis=1, keepdims=True)

    def floor():
        S = (X @ M) @ X.T
        F = A @ (X @ M.T) + A.T @ (X @ M)
        return S, F

    return floor


#: The N×N×d products one step of each model performs, as ``(kind, width)`` pairs:
#: ``"score"`` is an outer product ``(N×w)·(w×N)`` (scores, effective scores, dS/dt),
#: ``"apply"`` is ``A·(N×w)``, ``"apply_t"`` is ``Aᵀ·(N×w)``. A product of width 2d
#: costs about two of width d. Every product is one the scheme needs (none can be
#: dropped without changing the scheme); see tests/benchmarks/README.md for why.
#: The linear Part II models have no N×N product at all: their floors are their
#: N×d×d products, ``"gram"`` ``(N×w)ᵀ·(N×d)`` and ``"mix"`` ``(N×w)·(w×d)``.
MODEL_FLOORS: dict[str | None, tuple[tuple[str, int], ...]] = {
    # generic: score (X M) Xᵀ, force A (X Mᵀ) + Aᵀ (X M)
    None: (("score", 1), ("apply", 1), ("apply_t", 1)),
    # S(X₁); dS/dt(X₁, Ẋ₁) for work and tracking bound (one product of width 2d)
    "attention": (("score", 1), ("score", 2)),
    # S(X₁); force at X₁ (cached for the next kick); dS/dt for the tracking bound
    "canonical": (("score", 1), ("apply", 1), ("apply_t", 1), ("score", 2)),
    # per sub-step: S(X₁), Ŝ₀ = G₀X₀ᵀ, predictor A_pred X₁W_Vᵀ, Ŝ₁ = G_pred X₁ᵀ,
    # force at X₁: A₁[X₁Mᵀ | X₁W_Vᵀ] and A₁ᵀ G₁ (cached for the next kick)
    "value_matching": (("score", 1), ("score", 1), ("apply", 1), ("score", 1),
                       ("apply", 2), ("apply_t", 1)),
    # βŜ at the end of Heun (the start's is the previous step's end); two Heun stages,
    # each A[X W_Vᵀ | X Mᵀ] and Aᵀ(X M − P W_V)
    "cotangent_lift": (("score", 1), ("apply", 2), ("apply_t", 1), ("apply", 2),
                       ("apply_t", 1)),
    # S(X₁) for A*(X₁); force at X₁ (cached for the next kick)
    "reduced": (("score", 1), ("apply", 1), ("apply_t", 1)),
    # Heun: predictor stage S(X̃), A*(X̃)X̃W_Vᵀ; end S(X₁), A*(X₁)X₁W_Vᵀ (cached)
    "transformer": (("score", 1), ("apply", 1), ("score", 1), ("apply", 1)),
    # Part II, classical RK4 (four stages). Each stage: the scores x_iᵀ A x_j (their
    # row shift rides along as one more column) and the weights applied to [X V | 1].
    "softmax_first_order": (("score", 1), ("apply", 1)) * 4,
    # the same field v(X) at each stage (ẋ = y needs no product)
    "softmax_momentum": (("score", 1), ("apply", 1)) * 4,
    # each stage the scores x_iᵀ A x_j (log z from their exponentials) and the weights
    # applied to [A x_j | r_j A x_j] (both sums of the force); at the end the scores
    # again for log z, which the energy check of a dissipative model needs
    "softmax_inertial": (("score", 1), ("apply", 2)) * 4 + (("score", 1),),
    # each stage XᵀX (second moment) and X (A S V); the stop test's λ_max(S) at the end
    "linear": (("gram", 1), ("mix", 1)) * 4 + (("gram", 1),),
    # each stage G = XᵀY, X (A G), Y (GᵀA) and X V; at the end the stop tests' XᵀX
    # (λ_max) and the energy check's XᵀY and X V
    "linear_accelerated": (("gram", 1), ("mix", 1), ("mix", 1), ("mix", 1)) * 4
    + (("gram", 1), ("gram", 1), ("mix", 1)),
}


def floor_units(model: str | None) -> int:
    """Size of a model's floor in units of one product of width d."""
    return sum(w for _, w in MODEL_FLOORS[model])


def model_floor(model: str | None, N: int, d: int, seed: int = 0) -> Callable[[], object]:
    """The bare products of :data:`MODEL_FLOORS` ``[model]`` on arrays of the step's size."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2 * d))
    A = rng.random((N, N))
    A /= A.sum(axis=1, keepdims=True)
    calls = []
    for kind, width in MODEL_FLOORS[model]:
        L, R = np.ascontiguousarray(X[:, :width * d]), np.ascontiguousarray(X[:, -width * d:])
        if kind == "gram":
            R = np.ascontiguousarray(X[:, -d:])
        elif kind == "mix":
            R = rng.standard_normal((width * d, d))
        calls.append((kind, L, R))

    def floor():
        # each result is dropped before the next product, as a step's temporaries are
        # (N×N results kept alive together would time fresh pages, not products)
        out = None
        for kind, L, R in calls:
            if kind == "score":
                out = L @ R.T
            elif kind == "apply":
                out = A @ L
            elif kind == "apply_t":
                out = A.T @ L
            elif kind == "gram":
                out = L.T @ R
            else:
                out = L @ R
        return out

    return floor


def fit_exponent(sizes, seconds) -> float:
    """Slope of log(seconds) against log(size), a least-squares fit."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def table_row(table: str, row: dict) -> None:
    """Add ``row`` to the table printed at the end of the run."""
    TABLES.setdefault(table, []).append(dict(row))


def record(benchmark, table: str, row: dict) -> None:
    """Store ``row`` in ``benchmark.extra_info`` and in the table printed at the end."""
    benchmark.extra_info.update(row)
    table_row(table, row)


def _cell(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.2e}"
    return str(value)


def format_table(rows: list[dict]) -> list[str]:
    """Aligned text lines of ``rows`` (columns: union of keys, in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    cells = [[_cell(row.get(k, "")) for k in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return lines


def pytest_terminal_summary(terminalreporter):
    """Print every ratio table gathered in a timed run."""
    for title, rows in TABLES.items():
        terminalreporter.write_sep("=", title)
        for line in format_table(rows):
            terminalreporter.write_line(line)
