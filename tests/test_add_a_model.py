"""The README's "How to add a model", proven: a toy model registered at test time runs
through Simulation, simulate and the command line, and a setting of its energy changes
mid-run with protocol work."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

import dynamics
from dynamics import Settings, Simulation, State, models, simulate
from dynamics.cli import main
from dynamics.steppers import Stepper


# -- the model: H = ‖P‖²/2 + (k/2)‖X‖², a harmonic oscillator per coordinate -----------
@dataclass(frozen=True)
class Harmonic:
    k: float


def force(prob, X):
    """``Ṗ = −kX``."""
    return -prob.k * X


def hamiltonian(prob, state, log_a=None):
    return 0.5 * float(np.sum(state.P**2)) + 0.5 * prob.k * float(np.sum(state.X**2))


class SymplecticEuler(Stepper):
    """``P₁ = P + h f(X)``, ``X₁ = X + h P₁``."""

    order = 1

    def step(self, state, carry, h):
        P1 = state.P + h * force(self.problem, state.X)
        return State(t=state.t + h, X=state.X + h * P1, P=P1), None


def build(values, given):
    rng = np.random.default_rng(values["seed"])
    X = given.get("features", rng.standard_normal((values["n_tokens"], values["dim"])))
    return Harmonic(values["confinement"]), State(t=0.0, X=X, P=np.zeros_like(X))


def diagnostics(prob, state, energy0):
    H = hamiltonian(prob, state)
    return {"t": state.t, "hamiltonian": H, "work": state.work,
            "energy_residual": H - energy0 - state.work}, {}


TOY = models.ModelSpec(
    name="toy_harmonic", part=2, title="Harmonic tokens", section="toy",
    settings=("confinement",), energy_settings=("confinement",),
    equations=r"$H = \tfrac12\|P\|^2 + \tfrac k2\|X\|^2$", look_for="H oscillates, bounded.",
    build=build, reproblem=lambda prob, state, values: (Harmonic(values["confinement"]), state),
    stepper=SymplecticEuler, energy=hamiltonian, diagnostics=diagnostics,
    readable={"force": force, "hamiltonian": hamiltonian},
)


@pytest.fixture
def toy():
    models.register(TOY)
    yield TOY
    models.unregister(TOY.name)
    assert TOY.name not in Settings.param.model.objects


def test_a_registered_model_runs_everywhere(toy, tmp_path, capsys):
    assert toy.name in models.names(part=2) and toy.name in Settings.param.model.objects
    assert toy.name in dynamics.MODELS and toy.name in dynamics.PART_II_MODELS
    settings = Settings(model=toy.name, n_tokens=3, dim=2, confinement=4.0, dt=0.001)
    sim = Simulation(settings)
    frame = sim.step(500)
    assert frame.t == pytest.approx(0.5) and frame.features.shape == (3, 2)
    # symplectic Euler: H stays within O(h) of its start
    assert abs(frame.diagnostics["energy_residual"]) < 1e-2 * sim.energy()
    # a change of its energy setting does protocol work, the balance keeps its origin
    H_before = sim.energy()
    settings.confinement = 9.0
    after = sim.step(0)
    assert sim.changes[-1].work == pytest.approx(sim.energy() - H_before)
    assert after.diagnostics["work"] == pytest.approx(sim.changes[-1].work)
    assert abs(after.diagnostics["energy_residual"]) < 1e-2 * H_before
    # any other setting it reads restarts it; the seed is common to every model
    settings.seed = 3
    assert sim.sync() == "restart" and sim.t == 0.0
    # (its first-order steps keep H to 1e-2 of the energy scale at k = 9 from dt = 1e-4:
    # coarser ones would stop where its balance broke)
    run = simulate(settings.copy(dt=1e-4), t_end=0.2, every=500)
    assert run.status == "running" and run.times[-1] == pytest.approx(0.2)
    assert list(run.diagnostics) == ["t", "hamiltonian", "work", "energy_residual"]
    out = tmp_path / "toy.csv"
    assert main(["run", "--model", toy.name, "--n-tokens", "3", "--dim", "2",
                 "--t-end", "0.1", "--out", str(out)]) == 0
    assert out.read_text().splitlines()[0] == "t,hamiltonian,work,energy_residual"
    assert main(["run", "--model", toy.name, "--t-end", "0.1", "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == toy.name


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="registered already"):
        models.register(TOY)


def test_a_spec_naming_unknown_or_unread_settings_is_refused():
    from dataclasses import replace

    with pytest.raises(ValueError, match="unknown settings"):
        models.register(replace(TOY, name="toy_typo", settings=("confinment",)))
    with pytest.raises(ValueError, match="not among the settings it reads"):
        models.register(replace(TOY, name="toy_stray", energy_settings=("kappa",)))
    assert "toy_typo" not in models.names() and "toy_stray" not in models.names()
