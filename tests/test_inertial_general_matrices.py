"""Part II with general (non-symmetric) kernel and value matrices: matrices act on columns
as on the Theory page (``A x_j``, ``V x_j``). The first-order flows and the momentum-only
control accept any ``A``, ``V`` and equal a per-token loop; the Hamiltonian models refuse
what they cannot take, with a message. User-given features and momenta are honoured by
every Part II model."""

import math

import numpy as np
import pytest

from dynamics import Settings, Simulation, models
from dynamics.inertial import (
    Damping,
    accelerated_force,
    inertial_force,
    linear_velocity,
    moment_field,
    second_moment,
    softmax_velocity,
)
from dynamics.models.linear import LinearProblem
from dynamics.models.linear_accelerated import AcceleratedProblem
from dynamics.models.softmax_first_order import SoftmaxProblem
from dynamics.models.softmax_inertial import InertialProblem
from dynamics.models.softmax_momentum import MomentumProblem
from dynamics.settings import PART_II_MODELS
from dynamics.workspace import Workspace


def general(seed, n=7, d=3):
    """Non-symmetric ``A`` (positive definite symmetric part) and ``V``; ``X``, ``Y``."""
    rng = np.random.default_rng(seed)
    A = np.eye(d) + 0.6 * rng.standard_normal((d, d))
    V = 0.8 * rng.standard_normal((d, d))
    assert np.abs(A - A.T).max() > 0.1 and np.abs(V - V.T).max() > 0.1
    return 0.8 * rng.standard_normal((n, d)), 0.3 * rng.standard_normal((n, d)), A, V


def linear_loop(X, A, V):
    """``ẋ_i = V S A x_i``, ``S = (1/N) Σ_j x_j x_jᵀ``, token by token."""
    n = X.shape[0]
    S = sum(np.outer(X[j], X[j]) for j in range(n)) / n
    return np.array([V @ S @ A @ X[i] for i in range(n)])


def softmax_loop(X, A, V):
    """``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``, token by token."""
    n = X.shape[0]
    out = []
    for i in range(n):
        w = np.array([math.exp(X[i] @ A @ X[j]) for j in range(n)])
        w /= w.sum()
        out.append(sum(w[j] * (V @ X[j]) for j in range(n)))
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_first_order_flows_take_any_matrices_as_on_the_theory_page(seed):
    """Readable functions, model fields and fused fields equal the per-token loops for
    non-symmetric ``A`` and ``V`` (before: ``X @ A`` and ``X @ V`` computed ``Aᵀ x`` and
    ``Vᵀ x``, the transposed model)."""
    X, Y, A, V = general(seed)
    damping = Damping("constant", 0.4)
    lin, soft = linear_loop(X, A, V), softmax_loop(X, A, V)
    transposed = linear_loop(X, A.T, V.T)
    print(f"seed {seed}: the transposed linear model is off by "
          f"{np.abs(transposed - lin).max() / np.abs(lin).max():.0%}")
    np.testing.assert_allclose(linear_velocity(X, A, V), lin, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(softmax_velocity(X, A, V), soft, rtol=1e-12, atol=1e-13)
    work = Workspace()
    for problem_type, name, expected in ((LinearProblem, "linear", lin),
                                         (SoftmaxProblem, "softmax_first_order", soft)):
        prob = problem_type(A=A, V=V, damping=damping)
        dX, _ = models.get(name).readable["field"](prob, 0.0, X, Y)
        np.testing.assert_allclose(dX, expected, rtol=1e-12, atol=1e-13)
        fused = prob.field(0.0, np.stack([X, Y]), work)
        np.testing.assert_allclose(fused[0], expected, rtol=1e-12, atol=1e-13)
    prob = MomentumProblem(A=A, V=V, damping=damping)
    for dX, dY in (models.get("softmax_momentum").readable["field"](prob, 0.0, X, Y),
                   prob.field(0.0, np.stack([X, Y]), work)):
        np.testing.assert_allclose(dX, Y)
        np.testing.assert_allclose(dY, soft - 0.4 * Y, rtol=1e-12, atol=1e-13)


def test_moment_law_of_the_linear_flow_for_any_matrices():
    """``Ṡ = V S A S + S Aᵀ S Vᵀ`` is the derivative of ``S = XᵀX/N`` along the particles."""
    X, _, A, V = general(3, n=9)
    Xdot = linear_loop(X, A, V)
    S_dot = (Xdot.T @ X + X.T @ Xdot) / X.shape[0]
    np.testing.assert_allclose(moment_field(second_moment(X), A, V), S_dot, rtol=1e-12,
                               atol=1e-13)


def test_softmax_rows_of_a_large_non_symmetric_kernel_use_their_maxima():
    """Scores past 709 with a non-symmetric ``A``: the fused field (exact row maxima,
    no Cauchy–Schwarz bound) is finite and equals the max-subtracted softmax."""
    X, Y, A, V = general(4)
    Xs = 40.0 * X
    s = Xs @ A @ Xs.T
    assert s.max() > 709
    W = np.exp(s - s.max(axis=1, keepdims=True))
    expected = (W / W.sum(axis=1, keepdims=True)) @ (Xs @ V.T)
    prob = SoftmaxProblem(A=A, V=V)
    assert not prob.kernel_spd
    with np.errstate(all="raise", under="ignore"):
        got = prob.field(0.0, np.stack([Xs, Y]), Workspace())[0]
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11 * np.abs(expected).max())


def test_hamiltonian_models_refuse_non_symmetric_matrices_with_a_message():
    """Their energies see only symmetric parts: a non-symmetric ``A`` (or ``V`` for the
    accelerated model) is refused, by the problem and by the readable functions."""
    X, Y, A, V = general(5)
    S_A, S_V = 0.5 * (A + A.T), 0.5 * (V + V.T)
    with pytest.raises(ValueError, match="linear_accelerated needs a symmetric A"):
        AcceleratedProblem(A=A, V=S_V)
    with pytest.raises(ValueError, match="linear_accelerated needs a symmetric V"):
        AcceleratedProblem(A=S_A, V=V)
    with pytest.raises(ValueError, match="accelerated linear attention needs a symmetric "
                                         "value matrix V"):
        accelerated_force(X, Y, S_A, V)
    with pytest.raises(ValueError, match="softmax_inertial needs a symmetric kernel A"):
        InertialProblem(A=A, V=A)
    with pytest.raises(ValueError, match="inertial softmax attention needs a symmetric "
                                         "kernel A"):
        inertial_force(X, Y, A, np.eye(3))


@pytest.mark.parametrize("model", PART_II_MODELS)
def test_given_features_and_momenta_are_honoured_by_every_part_two_model(model):
    """``Simulation(settings, features=X, momenta=Y)``: the run starts from ``X`` and
    ``Y`` (a first-order model has no momenta: it refuses ``Y`` by name) and its first
    step is the model's field there."""
    rng = np.random.default_rng(7)
    X, Y = 0.7 * rng.standard_normal((6, 3)), 0.2 * rng.standard_normal((6, 3))
    s = Settings(model=model, n_tokens=6, dim=3, dt=1e-4, value_diag="0.5")
    if models.get(model).build(s.values(), {})[0].second_order:
        sim = Simulation(s, features=X, momenta=Y)
        np.testing.assert_array_equal(sim.state.P, Y)
    else:
        with pytest.raises(ValueError, match=f"model '{model}' has no momenta"):
            Simulation(s, features=X, momenta=Y)
        sim = Simulation(s, features=X)
        np.testing.assert_array_equal(sim.state.P, np.zeros_like(Y))
    st = sim.state
    np.testing.assert_array_equal(st.X, X)
    dX, _ = models.get(model).readable["field"](sim.problem, 0.0, X, st.P)
    sim.advance(1)
    np.testing.assert_allclose((sim.state.X - X) / 1e-4, dX, rtol=1e-3, atol=1e-5)
    sim.reset()  # a restart keeps the given arrays
    np.testing.assert_array_equal(sim.state.X, X)
