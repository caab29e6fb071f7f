"""Cost of stochastic logits: one step with ``logit_noise`` > 0 over the same step without
(``noisy/quiet``), for every model that relaxes attention, timed side by side.

The noise adds per step: one Philox draw of N² normals, two energy evaluations (the
kick's energy jump, counted as work) and the carry's attention-dependent terms computed
afresh (a force, a dissipation rate). Reported, not asserted; the run stays resolved
(λh = 0.01), where a noisy step takes the same branch of its scheme as a quiet one.
"""

from __future__ import annotations

import pytest

from dynamics import Settings, Simulation

from .conftest import record, step_times

DIM = 16
SIZES = (64, 256)
MODELS = ("attention", "canonical", "value_matching", "cotangent_lift")


@pytest.mark.parametrize("n_tokens", SIZES)
@pytest.mark.parametrize("model", MODELS)
def test_noise_cost(benchmark, model, n_tokens):
    sims = {name: Simulation(Settings(model=model, n_tokens=n_tokens, dim=DIM,
                                      logit_noise=sigma))
            for name, sigma in (("quiet", 0.0), ("noisy", 0.3))}
    benchmark.group = f"noise N={n_tokens} d={DIM}"
    t = step_times(benchmark, sims, "noisy", rounds=5)
    if t is None:
        return
    record(benchmark, f"noise cost (d={DIM}): noisy/quiet step", {
        "model": model, "N": n_tokens, "noisy/quiet": t["noisy"] / t["quiet"],
        "quiet_us": 1e6 * t["quiet"], "noisy_us": 1e6 * t["noisy"]})
