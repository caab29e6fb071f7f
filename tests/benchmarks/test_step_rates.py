"""Step rate of every model against the matmul floor of the same size (issue item 1).

Two floors, both timed side by side with the step:

* the generic floor, the same three products for every model: one score product
  ``(X M) Xᵀ`` plus one force ``A (X Mᵀ) + Aᵀ (X M)`` (:func:`conftest.matmul_floor`);
* the model's floor, exactly the N×N×d products its scheme performs in one step
  (:data:`conftest.MODEL_FLOORS`, :func:`conftest.model_floor`; ``units`` is its size in
  products of width d).

Reported, not asserted: ``step/floor`` (generic) and ``step/model floor`` (targets ≤ 5
at N = 256, ≤ 3 at N = 1024) and ``frame/step``, the cost of the diagnostics frame in
steps.
"""

from __future__ import annotations

import pytest

from dynamics import PART_I_MODELS, PART_II_MODELS, Settings, Simulation

from .conftest import MODEL_FLOORS, floor_units, matmul_floor, model_floor, record, side_by_side

DIM = 16
SIZES = (64, 256, 1024)
#: Settings a model needs to keep running while timed: with V = I the linear models
#: blow up at t = 1/(2 a v s0) = 1 (MODEL.md §11); V = -I exists globally. The inertial
#: softmax model blows up within t ≈ 0.005 at N = 1024, d = 16 (sooner for larger N and
#: s0): a small cloud and dt = 1e-5 keep it running for the few hundred timed steps
#: (the cost of a step does not depend on them).
OVERRIDES = {"linear": {"value_diag": "-1"}, "linear_accelerated": {"value_diag": "-1"},
             "softmax_inertial": {"second_moment": 0.03, "dt": 1e-5}}


def _part_two_runs() -> bool:
    try:
        Simulation(Settings(model="linear")).advance(1)
    except Exception:  # noqa: BLE001 - any failure means "not available in this build"
        return False
    return True


MODELS = PART_I_MODELS + (PART_II_MODELS if _part_two_runs() else ())


@pytest.mark.parametrize("n_tokens", SIZES)
@pytest.mark.parametrize("model", MODELS)
def test_step_rate(benchmark, model, n_tokens):
    sim = Simulation(Settings(model=model, n_tokens=n_tokens, dim=DIM,
                              **OVERRIDES.get(model, {})))
    benchmark.group = f"step N={n_tokens} d={DIM}"
    benchmark.pedantic(sim.advance, args=(1,), rounds=3 if n_tokens >= 1024 else 10,
                       iterations=1)
    if sim.status != "running":
        pytest.skip(f"{model} N={n_tokens}: {sim.message}")
    frame = sim.frame()
    assert frame.features.shape == (n_tokens, DIM)
    if benchmark.disabled:
        return
    fns = {"step": lambda: sim.advance(1), "frame": sim.frame,
           "floor": matmul_floor(n_tokens, DIM)}
    if model in MODEL_FLOORS:
        fns["model floor"] = model_floor(model, n_tokens, DIM)
    t = side_by_side(fns, rounds=5)
    nan = float("nan")
    if sim.status != "running":
        pytest.skip(f"{model} N={n_tokens} stopped while timed: {sim.message}")
    record(benchmark, f"step rates (d={DIM}): step/floor and frame/step", {
        "model": model, "N": n_tokens,
        "step/floor": t["step"] / t["floor"],
        "step/model floor": t["step"] / t["model floor"] if "model floor" in t else nan,
        "units": floor_units(model) if model in MODEL_FLOORS else nan,
        "frame/step": t["frame"] / t["step"],
        "step_us": 1e6 * t["step"], "floor_us": 1e6 * t["floor"],
        "model_floor_us": 1e6 * t["model floor"] if "model floor" in t else nan,
    })
