"""What a run says about its physics: the cotangent lift's momentum term reported as what
it is (Theory page, Part I: coupled Hamiltonian models)."""

import math

import numpy as np
import pytest

from dynamics import DIAGNOSTICS, NOT_APPLICABLE, PART_I_MODELS, Settings, Simulation


# -- the cotangent lift's momentum term ---------------------------------------------------
def test_cotangent_lift_reports_its_momentum_term_not_a_kinetic_energy():
    """``momentum_energy = ⟨P, A X W_Vᵀ⟩`` (of either sign: negative in the default run),
    ``kinetic_energy`` NaN and marked not applicable; the new column is the last."""
    assert DIAGNOSTICS[-1] == "momentum_energy"
    assert "kinetic_energy" in NOT_APPLICABLE["cotangent_lift"]
    sim = Simulation(Settings(model="cotangent_lift", init_momentum="random"))
    W_V = sim.problem.W_V
    values = []
    for _ in range(20):
        f = sim.step(50)
        d = f.diagnostics
        assert tuple(d) == DIAGNOSTICS and math.isnan(d["kinetic_energy"])
        term = float(np.sum(f.momenta * (f.attention @ f.features @ W_V.T)))
        assert d["momentum_energy"] == pytest.approx(term, rel=1e-12, abs=1e-12)
        values.append(d["momentum_energy"])
    assert min(values) < 0


@pytest.mark.parametrize("model", [m for m in PART_I_MODELS if m != "cotangent_lift"])
def test_other_models_report_their_kinetic_energy_as_momentum_energy(model):
    f = Simulation(Settings(model=model, init_momentum="random")).step(20)
    d = f.diagnostics
    assert "momentum_energy" not in NOT_APPLICABLE.get(model, ())
    assert d["momentum_energy"] == d["kinetic_energy"]
