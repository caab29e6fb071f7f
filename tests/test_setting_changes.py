"""Setting changes between steps: what continues, what restarts, and the protocol work
of a change of the energy (Theory page: "Changing a setting mid-run")."""

import numpy as np
import pytest

from dynamics import Settings, Simulation
from dynamics import energy as en

SMALL = dict(n_tokens=4, dim=3, dt=0.02)


# --- mid-run changes ----------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [("beta", 3.0), ("gamma", 5.0), ("kappa", 2.0),
                                         ("confinement", 4.0), ("dt", 0.01)])
def test_energy_setting_change_continues_from_current_state(name, value):
    s = Settings(model="canonical", init_momentum="random", **SMALL)
    sim = Simulation(s)
    before = sim.step(25)
    s.param.update(**{name: value})
    same = sim.step(0)
    assert same.t == before.t
    np.testing.assert_array_equal(same.features, before.features)
    np.testing.assert_array_equal(same.attention, before.attention)
    assert same.diagnostics["energy_residual"] == pytest.approx(
        before.diagnostics["energy_residual"], abs=1e-12)
    after = sim.step(10)
    assert after.t == pytest.approx(before.t + 10 * s.dt)
    # the change does protocol work: no jump of the residual, only integrator error after
    assert abs(after.diagnostics["energy_residual"]) <= 1e-2 * after.diagnostics["dissipated"]
    if name == "beta":
        assert sim.problem.beta == 3.0


@pytest.mark.parametrize("model", ["attention", "canonical", "value_matching",
                                   "cotangent_lift", "reduced"])
def test_quench_does_protocol_work(model):
    """A β change at fixed state adds E_new(state) − E_old(state) to ``work``: the energy
    jumps, ``work`` jumps by the same amount, E(0) is kept and the residual stays."""
    s = Settings(model=model, init_momentum="random", **SMALL)
    sim = Simulation(s)
    before = sim.step(25)
    E_old = sim.energy()
    s.beta = 4.0
    E_new = sim.energy()  # not yet applied: the change waits for the next advance
    assert E_new == E_old
    same = sim.step(0)
    (change,) = sim.changes
    assert change.t == before.t and change.values == {"beta": (1.0, 4.0)}
    E_new = sim.energy()
    assert change.work == pytest.approx(E_new - E_old, rel=1e-13, abs=1e-13)
    assert abs(change.work) > 1e-3  # a real jump, seen on the energy plot
    d0, d1 = before.diagnostics, same.diagnostics
    assert d1["work"] - d0["work"] == pytest.approx(change.work, rel=1e-12, abs=1e-13)
    assert d1["hamiltonian"] - d0["hamiltonian"] == pytest.approx(change.work, rel=1e-12,
                                                                  abs=1e-13)
    assert d1["energy_residual"] == pytest.approx(d0["energy_residual"], abs=1e-12)
    # a γ change enters no energy: no work
    s.gamma = 3.0
    sim.step(0)
    assert sim.changes[-1].work == 0.0 or model == "reduced"


def test_restart_setting_change_restarts():
    s = Settings(model="canonical", **SMALL)
    sim = Simulation(s)
    sim.step(25)
    s.n_tokens = 5
    frame = sim.step(1)
    assert frame.t == pytest.approx(s.dt)
    assert frame.features.shape == (5, 3) and frame.attention.shape == (5, 5)
    assert frame.diagnostics["dissipated"] >= 0.0


def test_gamma_change_on_attention_model_changes_rate_not_state():
    s = Settings(model="attention", path="static", init_attention="random", **SMALL)
    sim = Simulation(s)
    a = sim.step(10)
    s.gamma = 4.0
    b = sim.step(10)
    # static features: log-odds shrink by exactly e^{−λ·0.2} with the new λ = γ/β
    W_a = np.log(a.attention) - np.log(a.softmax)
    W_b = np.log(b.attention) - np.log(b.softmax)
    np.testing.assert_allclose(en.oscillation(W_b), np.exp(-4.0 * 0.2) * en.oscillation(W_a),
                               rtol=1e-9)
    np.testing.assert_array_equal(b.features, a.features)


def test_settings_count_value_changes_and_a_run_takes_them_in():
    """``Settings.changes`` moves on a changed value only; a Simulation that advanced with
    nothing changed still takes a later change in (β here: the same as a fresh run
    continued from that state with the new β)."""
    s = Settings(model="canonical", n_tokens=5, dim=3)
    count = s.changes
    s.beta = s.beta
    assert s.changes == count
    s.beta = 2.0
    assert s.changes > count
    sim = Simulation(s)
    sim.advance(3)
    sim.advance(2)  # nothing changed: the settings are not reread
    s.gamma = 7.0
    sim.advance(1)
    assert sim.problem.gamma == 7.0 and sim.problem.beta == 2.0


@pytest.mark.parametrize("model", ["attention", "canonical"])
def test_tracking_bound_stays_a_bound_across_a_quench(model):
    """A β change moves the log-odds W = Z − βS by −Δβ S: the bound grows with it, so the
    plotted lag never exceeds it (it did: KL 6.9 > bound 5.3 after β 1 → 6)."""
    s = Settings(model=model, init_momentum="random", n_tokens=6, dim=3)
    sim = Simulation(s)
    sim.step(100)
    s.beta = 6.0
    for n in (0, 1, 20, 20, 20):
        d = sim.step(n).diagnostics
        assert d["kl"] <= d["kl_bound"] * (1 + 1e-12), d


def test_mass_change_updates_the_score_rate_of_the_bound():
    s = Settings(model="canonical", init_momentum="random", **SMALL)
    sim = Simulation(s)
    sim.step(10)
    s.mass = 3.0
    sim.step(0)
    st = sim.state
    expected = (st.P / 3.0) @ sim.problem.M @ st.X.T + st.X @ sim.problem.M @ (st.P / 3.0).T
    np.testing.assert_allclose(st.S_dot, expected, rtol=1e-12, atol=1e-12)


def test_a_restart_that_cannot_build_leaves_the_run_as_it_was():
    s = Settings(model="canonical", **SMALL)
    sim = Simulation(s)
    before = sim.step(5)
    s.param.update(model="softmax_inertial", value_diag="-1")
    with pytest.raises(ValueError, match="value_diag"):
        sim.step(1)
    assert sim.model == "canonical" and sim.t == before.t
    assert sim.frame().diagnostics["t"] == before.t  # still a consistent run
    with pytest.raises(ValueError):  # and the refused change is not forgotten
        sim.step(1)
    s.value_diag = "1"
    assert sim.sync() == "restart" and sim.model == "softmax_inertial"


def test_dt_never_restarts_a_run():
    for model in ("attention", "reduced", "transformer", "linear", "softmax_inertial"):
        s = Settings(model=model, n_tokens=4, dim=2)
        sim = Simulation(s)
        sim.step(3)
        s.dt = 0.005
        assert sim.sync() is None and sim.t > 0.0, model


def test_given_arrays_come_back_when_their_shapes_fit_again():
    s = Settings(model="canonical", **SMALL)
    X = np.arange(12.0).reshape(4, 3) / 10
    sim = Simulation(s, features=X)
    s.n_tokens = 5
    sim.step(0)
    assert sim.state.X.shape == (5, 3)
    s.n_tokens = 4
    sim.step(0)
    np.testing.assert_array_equal(sim.state.X, X)
