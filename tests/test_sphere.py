"""The normalised Transformer flow on the sphere and its clusters (Theory page: "Tokens on
the sphere"), against independent references: closed forms, the energy identity along a
tight ``solve_ivp`` solution, and the measured order of the projected scheme."""

import json
import math

import numpy as np
import pytest
from helpers import few_examples, fitted_order
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from dynamics import Settings, Simulation, models, simulate
from dynamics import clustering as cl
from dynamics.cli import main
from dynamics.reference import solve_reference

KERNELS = ("softmax", "unnormalised")


def sphere(**values):
    return Settings(model="sphere", **values)


# -- the pieces, against closed forms ----------------------------------------------------
def test_energy_is_maximal_exactly_when_all_tokens_coincide():
    rng = np.random.default_rng(0)
    for beta in (0.5, 1.0, 9.0, 600.0):
        x = cl.unit_rows(rng.standard_normal((1, 4)))
        same = np.repeat(x, 7, axis=0)
        assert cl.interaction_energy(same, beta) == pytest.approx(
            cl.max_interaction_energy(7, beta), rel=1e-13)
        assert cl.max_interaction_energy(7, beta) == pytest.approx(
            49 * math.exp(beta) / (2 * beta), rel=1e-13)
        spread = cl.unit_rows(rng.standard_normal((7, 4)))
        assert cl.interaction_energy(spread, beta) < cl.max_interaction_energy(7, beta)
    # a plain sum where it does not overflow
    X = cl.unit_rows(rng.standard_normal((5, 3)))
    plain = np.exp(2.0 * X @ X.T).sum() / 4.0
    assert cl.interaction_energy(X, 2.0) == pytest.approx(plain, rel=1e-13)


def test_tangent_part_is_the_projection_i_minus_x_xt():
    rng = np.random.default_rng(1)
    X = cl.unit_rows(rng.standard_normal((6, 4)))
    V = rng.standard_normal((6, 4))
    T = cl.tangent_part(X, V)
    for x, v, t in zip(X, V, T, strict=True):
        np.testing.assert_allclose(t, (np.eye(4) - np.outer(x, x)) @ v, atol=1e-15)
    np.testing.assert_allclose(np.einsum("ij,ij->i", X, T), 0.0, atol=1e-15)


def test_clusters_are_connected_groups_above_one_minus_eps():
    e = np.eye(3)
    tilt = cl.unit_rows([e[0] + 0.05 * e[1]])[0]  # cos ≈ 0.99875 to e0
    X = np.vstack([e[0], tilt, -e[0], e[2]])
    assert cl.cluster_labels(X, 0.01)[0] == 3  # {e0, tilt}, {−e0}, {e2}
    assert cl.cluster_labels(X, 1e-4)[0] == 4
    count, labels = cl.cluster_labels(X, 0.01)
    assert labels[0] == labels[1] and len({labels[0], labels[2], labels[3]}) == 3
    # a chain: a ~ b ~ c with a, c not close themselves is one cluster
    angles = np.array([0.0, 0.1, 0.2])
    chain = np.stack([np.cos(angles), np.sin(angles), 0 * angles], axis=1)
    assert cl.similarity(chain)[0, 2] < 1 - 0.01 < cl.similarity(chain)[0, 1]
    assert cl.cluster_labels(chain, 0.01)[0] == 1
    with pytest.raises(ValueError, match="zero row"):
        cl.cluster_labels(np.zeros((2, 3)), 0.1)


def test_rescaled_tokens_undo_the_value_map():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((5, 3))
    np.testing.assert_allclose(cl.rescaled(X, 0.7 * np.eye(3), 2.0), math.exp(-1.4) * X,
                               rtol=1e-13)
    W = rng.standard_normal((3, 3))
    W = W + W.T  # symmetric: e^{−tW} from its eigenvectors
    lam, Q = np.linalg.eigh(W)
    E = (Q * np.exp(-0.3 * lam)) @ Q.T
    np.testing.assert_allclose(cl.rescaled(X, W, 0.3), X @ E.T, rtol=1e-12)


# -- the flow: oracles -------------------------------------------------------------------
@few_examples(20)
@given(N=st.integers(2, 12), d=st.integers(2, 6), beta=st.floats(0.1, 20.0),
       kernel=st.sampled_from(KERNELS), weights=st.sampled_from(("identity", "random")),
       seed=st.integers(0, 1000), dt=st.sampled_from((0.01, 0.05)))
def test_tokens_stay_on_the_sphere(N, d, beta, kernel, weights, seed, dt):
    sim = Simulation(sphere(n_tokens=N, dim=d, beta=beta, sphere_kernel=kernel,
                            sphere_weights=weights, seed=seed, dt=dt))
    for _ in range(4):
        frame = sim.step(25)
        if sim.status != "running":  # the unnormalised kernel at large β: speeds ~ e^β
            assert kernel == "unnormalised" and sim.status == "failed", sim.message
            assert "lower dt below" in sim.message
        assert np.max(np.abs(np.linalg.norm(frame.features, axis=1) - 1.0)) <= 1e-12


@few_examples(15)
@given(N=st.integers(2, 10), d=st.integers(2, 5), beta=st.floats(0.1, 10.0),
       kernel=st.sampled_from(KERNELS), seed=st.integers(0, 1000))
def test_interaction_energy_never_decreases(N, d, beta, kernel, seed):
    if kernel == "unnormalised":  # its speed is up to e^β: the step follows it
        beta = min(beta, 5.0)
    settings = sphere(n_tokens=N, dim=d, beta=beta, sphere_kernel=kernel, seed=seed,
                      dt=0.01 if kernel == "softmax" else 0.2 / (N * math.exp(beta)))
    run = simulate(settings, t_end=200 * settings.dt, every=5)
    E = run.diagnostics["hamiltonian"]
    assert np.all(np.diff(E) >= -1e-12 * E[1:])
    assert E[-1] <= cl.max_interaction_energy(N, beta) * (1 + 1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_energy_rate_is_the_identity_of_the_theory(kernel):
    """``dE_β/dt = Σ z_i ‖ẋ_i‖²`` (softmax) or ``N Σ ‖ẋ_i‖²`` (unnormalised): compared with
    the derivative of ``E_β`` along a tight ``solve_ivp`` solution (central differences)."""
    settings = sphere(n_tokens=6, dim=3, beta=2.0, sphere_kernel=kernel, seed=5)
    sim = Simulation(settings)
    prob, velocity = sim.problem, models.get("sphere").readable["velocity"]
    N, d = 6, 3
    sol = solve_ivp(lambda t, y: velocity(prob, y.reshape(N, d)).ravel(), (0, 0.6),
                    sim.state.X.ravel(), method="DOP853", rtol=1e-13, atol=1e-14,
                    dense_output=True)
    h = 1e-4
    for t in (0.1, 0.3, 0.5):
        X = sol.sol(t).reshape(N, d)
        E_plus = cl.interaction_energy(cl.unit_rows(sol.sol(t + h).reshape(N, d)), 2.0)
        E_minus = cl.interaction_energy(cl.unit_rows(sol.sol(t - h).reshape(N, d)), 2.0)
        rate = cl.energy_rate(X, velocity(prob, X), 2.0, kernel)
        assert rate > 0
        assert (E_plus - E_minus) / (2 * h) == pytest.approx(rate, rel=1e-6)


def test_one_cluster_at_the_clustering_preset():
    """Theory page, checked: N = 32, d = 3, β = 1, Gaussian directions: one cluster
    (min ⟨x_i, x_j⟩ > 1 − 1e-5) by t = 10, E_β from 643.0 to N² e/2 = 1391.76; and for
    three other seeds (generic data) one cluster too."""
    preset = clustering_presets()["Clustering on the sphere"]["settings"]
    settings = Settings(**preset)
    assert (settings.model, settings.n_tokens, settings.dim, settings.beta) == (
        "sphere", 32, 3, 1.0)
    sim = Simulation(settings)
    assert sim.frame().diagnostics["hamiltonian"] == pytest.approx(643.0, abs=0.05)
    sim.advance(int(round(10 / settings.dt)))
    frame = sim.frame()
    d = frame.diagnostics
    assert cl.cluster_labels(frame.features, settings.cluster_eps)[0] == 1
    assert cl.min_similarity(frame.features) > 1 - 1e-5
    assert d["hamiltonian"] == pytest.approx(32**2 * math.e / 2, rel=1e-5)
    assert d["hamiltonian"] == pytest.approx(1391.76, abs=0.005)
    for seed in (1, 2, 3):
        other = Simulation(settings.copy(seed=seed))
        other.advance(int(round(10 / settings.dt)))
        assert cl.cluster_labels(other.state.X, settings.cluster_eps)[0] == 1, seed


def test_several_clusters_persist_at_large_beta():
    """Theory page, checked: β = 9: 4 clusters by t = 5 and 3 from t = 20 to t = 200
    (metastability; ε = 0.01), at the metastability preset's settings (dt = 0.05, 1 s)."""
    preset = clustering_presets()["Metastable clusters (large β)"]["settings"]
    settings = Settings(**preset)
    assert (settings.beta, settings.cluster_eps, settings.n_tokens) == (9.0, 0.01, 32)
    sim, counts = Simulation(settings), {}
    for t in (5, 20, 50, 100, 200):
        sim.advance(int(round((t - sim.t) / settings.dt)))
        counts[t] = cl.cluster_labels(sim.state.X, settings.cluster_eps)[0]
    assert counts == {5: 4, 20: 3, 50: 3, 100: 3, 200: 3}
    assert np.max(np.abs(np.linalg.norm(sim.state.X, axis=1) - 1.0)) <= 1e-12  # 4000 steps
    assert sim.frame().diagnostics["hamiltonian"] < cl.max_interaction_energy(32, 9.0) / 2


# -- the scheme: measured order against solve_ivp of the projected flow -----------------
@pytest.mark.parametrize("kernel, weights", [("softmax", "identity"),
                                             ("unnormalised", "identity"),
                                             ("softmax", "random")])
def test_projected_heun_is_second_order(kernel, weights):
    base = sphere(n_tokens=5, dim=3, seed=3, beta=1.5, sphere_kernel=kernel,
                  sphere_weights=weights)
    ref, unpack = solve_reference(base, 1.0, rtol=1e-12, atol=1e-14)
    exact = unpack(ref.y[:, -1])["X"]
    assert np.max(np.abs(np.linalg.norm(exact, axis=1) - 1)) < 1e-11  # the sphere is invariant
    steps, errors = [], []
    for k in (3, 4, 5, 6):
        dt = 2.0**-k
        sim = Simulation(base.copy(dt=dt))
        sim.advance(2**k)
        assert sim.t == pytest.approx(1.0, abs=1e-12)
        steps.append(dt)
        errors.append(float(np.abs(sim.state.X - exact).max()))
    measured = fitted_order(steps, errors)
    print(f"sphere {kernel}/{weights}: errors {errors}, measured order {measured:.2f}")
    assert measured == pytest.approx(2.0, abs=0.25)


# -- settings, bad input, setting changes, command line ---------------------------------
def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="beta must be in"):
        Simulation(sphere(beta=800.0))
    with pytest.raises(ValueError, match="cluster_eps must be in"):
        sphere(cluster_eps=0.0)
    with pytest.raises(ValueError, match="sphere_kernel"):
        sphere(sphere_kernel="linear")
    X = np.ones((4, 2))
    X[1] = 0.0
    with pytest.raises(ValueError, match="zero row"):
        Simulation(sphere(n_tokens=4, dim=2), features=X)


def test_beta_raised_above_the_limit_mid_run_stops_the_run_naming_beta():
    settings = sphere(n_tokens=5, dim=3)
    sim = Simulation(settings)
    sim.advance(3)
    settings.beta = 750.0
    sim.advance(3)
    assert sim.status == "diverged" and sim.t == pytest.approx(0.03)
    assert "beta must be in [0.001, 700] for the sphere model" in sim.message
    assert cl.interaction_energy(sim.state.X, 750.0) == math.inf  # never an exception


def test_given_features_are_normalised():
    X = np.array([[3.0, 4.0], [0.0, -2.0], [1.0, 1.0]])
    sim = Simulation(sphere(n_tokens=3, dim=2), features=X)
    np.testing.assert_allclose(sim.state.X, X / np.linalg.norm(X, axis=1, keepdims=True))


def test_your_own_matrices_drive_the_flow_and_a_real_head_is_refused():
    """Issue #14 item 1 for the sphere model: your ``M`` and ``W_V`` replace
    ``sphere_weights``'s (checked on the velocity written out token by token); a real
    head, several heads, momenta or an attention matrix are refused by name, never
    silently ignored."""
    rng = np.random.default_rng(7)
    X, M, W_V = (rng.standard_normal((5, 3)), rng.standard_normal((3, 3)),
                 rng.standard_normal((3, 3)))
    for kernel in KERNELS:
        sim = Simulation(sphere(n_tokens=5, dim=3, beta=2.0, sphere_kernel=kernel),
                         features=X, score_matrix=M, value_matrix=W_V)
        x = X / np.linalg.norm(X, axis=1, keepdims=True)
        expected = []
        for i in range(5):
            w = np.array([math.exp(2.0 * x[i] @ M @ x[j]) for j in range(5)])
            w = w / w.sum() if kernel == "softmax" else w / 5
            out = sum(w[j] * (W_V @ x[j]) for j in range(5))
            expected.append(out - (x[i] @ out) * x[i])
        velocity = models.get("sphere").readable["velocity"](sim.problem, sim.state.X)
        np.testing.assert_allclose(velocity, expected, rtol=1e-12, atol=1e-13)
    for values, kwargs, words in (
            ({"weights": "minilm"}, {}, "weights must be 'seed' for the sphere model"),
            ({"heads": "all"}, {}, "heads must be 'one' for the sphere model"),
            ({}, {"momenta": np.zeros((5, 3))}, "has no momenta"),
            ({}, {"attention": np.full((5, 5), 0.2)}, "has no attention")):
        with pytest.raises(ValueError, match=words):
            Simulation(sphere(n_tokens=5, dim=3, **values), **kwargs)


def test_beta_change_does_protocol_work_and_kernel_or_eps_continue():
    settings = sphere(n_tokens=6, dim=3, beta=1.0)
    sim = Simulation(settings)
    sim.advance(50)
    X, E_old = sim.state.X.copy(), sim.energy()
    settings.beta = 3.0
    assert sim.sync() == "continue"
    np.testing.assert_array_equal(sim.state.X, X)
    assert sim.changes[-1].work == pytest.approx(cl.interaction_energy(X, 3.0) - E_old)
    settings.sphere_kernel = "unnormalised"
    settings.cluster_eps = 0.5
    assert sim.sync() == "continue" and sim.t > 0
    assert sim.problem.kernel == "unnormalised" and sim.changes[-1].work == 0.0
    settings.sphere_weights = "random"
    assert sim.sync() == "restart" and sim.t == 0.0


def test_command_line(capsys):
    assert main(["run", "--model", "sphere", "--sphere-kernel", "unnormalised", "--n-tokens",
                 "6", "--dim", "3", "--beta", "2", "--cluster-eps", "0.05", "--t-end", "1",
                 "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == "sphere" and summary["status"] == "completed"
    assert summary["t_final"] == pytest.approx(1.0)
    assert 0 < summary["final"]["hamiltonian"] <= cl.max_interaction_energy(6, 2.0)


def clustering_presets():
    from app import presets

    return {p["name"]: p for p in presets.load_presets()
            if p["settings"].get("model") == "sphere"}


def test_cli_normalise_sphere_is_the_sphere_model(capsys):
    """``--model transformer --normalise sphere`` runs the flow on the sphere (unit norms),
    ``--normalise none`` the unnormalised flow; another model is refused by name."""
    import json

    from dynamics.cli import main

    args = ["run", "--n-tokens", "6", "--dim", "3", "--t-end", "0.2", "--summary"]
    assert main([*args, "--model", "transformer", "--normalise", "sphere"]) == 0
    on_sphere = json.loads(capsys.readouterr().out)
    assert main([*args, "--model", "sphere"]) == 0
    assert json.loads(capsys.readouterr().out) == on_sphere
    assert main([*args, "--normalise", "none", "--model", "transformer"]) == 0
    assert json.loads(capsys.readouterr().out) != on_sphere
    with pytest.raises(SystemExit):
        main([*args, "--model", "canonical", "--normalise", "sphere"])
    assert "--normalise applies to the first-order Transformer flow" in capsys.readouterr().err
