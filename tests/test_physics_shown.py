"""What a run says about its physics: the confinement bound of the coupled models (named
before it matters and in the divergence message), and the cotangent lift's momentum term
reported as what it is (Theory page, Part I: coupled Hamiltonian models)."""

import math

import numpy as np
import pytest

from dynamics import DIAGNOSTICS, NOT_APPLICABLE, PART_I_MODELS, Settings, Simulation, simulate
from dynamics.initial import draw_initial_data
from dynamics.models.part_one import CONFINED_MODELS, confinement_bound, confinement_notice


# -- the confinement bound k > 2√N‖M‖₂ --------------------------------------------------
def test_confinement_bound_is_two_root_n_times_the_norm_of_m():
    s = Settings(model="reduced", n_tokens=16)
    M = draw_initial_data(16, s.dim, s.seed).M
    bound = confinement_bound(s)
    assert bound == pytest.approx(2 * 4 * np.linalg.norm(M, 2), rel=1e-14)
    assert bound == confinement_bound(M, 16) == confinement_bound(s.values())
    assert bound == pytest.approx(6.856, abs=1e-3)  # seed 0, N = 16, d = 4
    with pytest.raises(ValueError, match="n_tokens"):
        confinement_bound(M)


def test_the_bound_holds_the_scores_energy_below():
    """``|⟨A, X M Xᵀ⟩| ≤ √N ‖M‖₂ ‖X‖²`` for row-stochastic ``A`` (the reason for it)."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        n, d = rng.integers(2, 12), rng.integers(1, 5)
        M, X = rng.standard_normal((d, d)), rng.standard_normal((n, d))
        A = rng.random((n, n)) ** 8
        A /= A.sum(axis=1, keepdims=True)
        lhs = abs(float(np.sum(A * (X @ M @ X.T))))
        assert lhs <= math.sqrt(n) * np.linalg.norm(M, 2) * np.sum(X * X) * (1 + 1e-12)


def test_notice_names_the_bound_and_a_k_that_confines():
    s = Settings(model="reduced", n_tokens=16, beta=4.0)
    assert confinement_notice(s) == ("k = 2 is below 2√N‖M‖₂ = 6.9, the confinement that "
                                     "keeps H bounded below: try k ≥ 7")
    assert confinement_notice(s.copy(confinement=7.0)) is None
    assert CONFINED_MODELS == ("canonical", "value_matching", "reduced")
    for model in PART_I_MODELS:
        notice = confinement_notice(s.copy(model=model))
        assert (notice is not None) == (model in CONFINED_MODELS), model
    assert confinement_notice(s.copy(model="softmax_inertial")) is None


def test_a_run_that_diverges_below_the_bound_says_so_and_the_suggested_k_confines():
    """The reduced model, β = 4, N = 16: at k = 2 (below 2√N‖M‖₂ = 6.9) ``H`` is not held
    below and the features run away near t = 13.3; the message names the bound and
    k ≥ 7, with which the same run stays bounded."""
    s = Settings(model="reduced", n_tokens=16, beta=4.0)
    sim = Simulation(s)
    sim.advance(2000)
    assert sim.status == "diverged" and 13.0 < sim.diverged_at < 13.7
    assert sim.message.startswith(f"diverged at t = {sim.diverged_at:.4g}: feature norm")
    assert ("; k = 2 is below 2√N‖M‖₂ = 6.9, the confinement that keeps H bounded below: "
            "try k ≥ 7; the run stopped") in sim.message
    confined = simulate(s.copy(confinement=7.0), t_end=20.0, every=100)
    assert confined.status == "running"
    assert confined.diagnostics["feature_norm"].max() < 3 * confined.diagnostics[
        "feature_norm"][0]


def test_a_divergence_above_the_bound_or_of_another_model_adds_no_notice():
    confined = Simulation(Settings(model="reduced", n_tokens=16, confinement=7.0,
                                   norm_limit=1.0))
    confined.advance(1)
    assert confined.status == "diverged" and "2√N‖M‖₂" not in confined.message
    lift = Simulation(Settings(model="cotangent_lift", norm_limit=1.0))
    lift.advance(1)
    assert lift.status == "diverged" and "2√N‖M‖₂" not in lift.message


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
