"""Softmax attention, first order and inertial (MODEL.md §13)."""

import numpy as np
import pytest
from helpers import few_examples
from hypothesis import given
from hypothesis import strategies as st

from dynamics.inertial import (
    Damping,
    inertial_dissipation,
    inertial_force,
    inertial_hamiltonian,
    inertial_kinetic,
    inertial_velocity,
    log_partition,
    softmax_kernel,
    softmax_velocity,
    value_kernel_ratio,
)
from dynamics.inertial.softmax import inertial_energies, inertial_parts
from dynamics.models import softmax_momentum
from dynamics.models.part_two import Problem
from dynamics.steppers.rk4 import rk4_step
from dynamics.workspace import Workspace

FAST = few_examples(10)


def setup(seed, n=6, d=3, scale=0.5):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A = (q * rng.uniform(0.5, 1.5, d)) @ q.T
    V = (q * rng.uniform(0.5, 1.5, d)) @ q.T
    X = scale * rng.standard_normal((n, d))
    Y = 0.3 * rng.standard_normal((n, d))
    return X, Y, A, V, value_kernel_ratio(A, V)


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8), d=st.integers(1, 4))
def test_guarded_field_equals_naive_formula(seed, n, d):
    """Mean-field normalisation: ``z_i = (1/N) Σ_j e^{s_ij}``."""
    X, Y, A, V, B = setup(seed, n, d)
    s = X @ A @ X.T
    z = np.exp(s).mean(1)
    q = np.einsum("ij,jk,ik->i", Y, B, Y)
    r = q / z**2
    naive = np.einsum("ij,ijk->ik", np.exp(s),
                      (r[:, None] + r[None, :] + 2)[:, :, None] * (X @ A)[None]) / (2 * n)
    np.testing.assert_allclose(inertial_force(X, Y, A, B), naive, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(inertial_velocity(X, Y, A, B), (Y @ B) / z[:, None],
                               rtol=1e-12)
    H = 0.5 * np.sum(q / z) - np.exp(s).sum() / (2 * n)
    assert inertial_hamiltonian(X, Y, A, B) == pytest.approx(H, rel=1e-12)
    W = np.exp(s) / (n * z[:, None])
    np.testing.assert_allclose(softmax_velocity(X, A, V), W @ X @ V, atol=1e-12)


def energy_residual(X0, Y0, A, B, damping, T, h):
    n, d = X0.shape

    def f(t, z):
        X, Y = z[: n * d].reshape(n, d), z[n * d: 2 * n * d].reshape(n, d)
        a = float(damping.rate(t))
        dX = inertial_velocity(X, Y, A, B)
        dY = -a * Y + inertial_force(X, Y, A, B)
        return np.concatenate([dX.ravel(), dY.ravel(), [-a * inertial_dissipation(X, Y, A, B)]])

    z = np.concatenate([X0.ravel(), Y0.ravel(), [0.0]])
    for k in range(int(round(T / h))):
        z = rk4_step(f, k * h, z, h)
    X, Y = z[: n * d].reshape(n, d), z[n * d: 2 * n * d].reshape(n, d)
    return inertial_hamiltonian(X, Y, A, B) - inertial_hamiltonian(X0, Y0, A, B) - z[-1]


@pytest.mark.parametrize("damping", [Damping("constant", 0.7),
                                     Damping("nesterov", 0.1, 3.0, 1.0)],
                         ids=["constant", "nesterov"])
def test_energy_law_residual_small_and_shrinking(damping):
    """dH/dt = −α Σ_i y_iᵀ B y_i / z_i."""
    X, Y, A, V, B = setup(4, n=6, d=2, scale=0.3)
    H0 = abs(inertial_hamiltonian(X, Y, A, B))
    res = [abs(energy_residual(X, Y, A, B, damping, 0.1, h)) / H0 for h in (0.01, 0.005)]
    print(f"softmax relative energy-law residuals {res}, ratio {res[0] / res[1]:.1f}")
    assert res[1] < 1e-8
    assert res[0] / res[1] > 12


def test_overflow_guard_for_large_scores():
    """Scores up to 1e6: no floating-point error, finite weights and velocities."""
    X, Y, A, V, B = setup(1, n=5, d=3)
    for scale in (30.0, 300.0, 1000.0):
        Xs = scale * X
        with np.errstate(all="raise"):
            W = softmax_kernel(Xs, A)
            logz = log_partition(Xs, A)
            v = inertial_velocity(Xs, Y, A, B)
            u = softmax_velocity(Xs, A, V)
            F = inertial_force(Xs, Y, A, B)
        assert np.abs(Xs @ A @ Xs.T).max() > 710  # naive exp would overflow
        assert np.all(W >= 0) and np.allclose(W.sum(1), 1, atol=1e-12, rtol=0)
        assert np.all(np.isfinite(logz)) and np.all(np.isfinite(v)) and np.all(np.isfinite(u))
        assert not np.any(np.isnan(F))
        np.testing.assert_allclose(v, 5 * (Y @ B) * np.exp(-logz)[:, None])


def test_B_must_be_spd():
    A = np.diag([1.0, 2.0])
    with pytest.raises(ValueError, match="positive definite"):
        value_kernel_ratio(A, np.diag([1.0, -1.0]))
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((2, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        value_kernel_ratio(A, q @ np.diag([1.0, 3.0]) @ q.T)


def test_momentum_only_control_runs():
    X, Y, A, V, _ = setup(2)
    prob = Problem(A=A, V=V, damping=Damping("constant", 0.5))
    dX, dY = softmax_momentum.field(prob, 0.0, X, Y)
    np.testing.assert_allclose(dX, Y)
    np.testing.assert_allclose(dY, -0.5 * Y + softmax_velocity(X, A, V))

    def f(t, z):
        return np.stack(softmax_momentum.field(prob, t, z[0], z[1]))

    z = np.stack([X, np.zeros_like(X)])
    for k in range(200):
        z = rk4_step(f, 0.01 * k, z, 0.01)
    assert np.all(np.isfinite(z))


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8), d=st.integers(1, 4),
       scale=st.sampled_from([0.5, 3.0, 12.0]))
def test_shifted_softmax_field_equals_the_kernel_formula(seed, n, d, scale):
    """The engine's field (``spd=True``: rows shifted by a Cauchy–Schwarz bound, or by
    their exact maxima once the bound is far above the diagonal) is the softmax flow
    ``rowsoftmax(x_iᵀ A x_j) V x_j`` itself, with a reused buffer too."""
    X, _, A, V, _ = setup(seed, n, d, scale)
    expected = softmax_kernel(X, A) @ (X @ V)
    work = Workspace()
    for _ in range(2):  # the second call reuses the buffer
        np.testing.assert_allclose(softmax_velocity(X, A, V, work, spd=True), expected,
                                   rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_shifted_softmax_field_is_finite_where_plain_exponentials_overflow():
    """Scores up to 2000 (e^2000 overflows): the shifted field stays the kernel formula."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((7, 3))
    X *= np.sqrt(2000.0) / np.linalg.norm(X, axis=1, keepdims=True)  # s_ii = 2000
    A, V = np.eye(3), np.diag([1.0, 0.5, 2.0])
    expected = softmax_kernel(X, A) @ (X @ V)
    got = softmax_velocity(X, A, V, Workspace(), spd=True)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_fused_inertial_field_equals_the_two_terms_at_any_scale():
    """inertial_parts (one score product, per-row shifts) gives inertial_velocity and
    inertial_force, and inertial_energies the three energies, from moderate scores to
    scores whose exponentials overflow (then the same ±inf, never NaN, no FP error)."""
    X, Y, A, V, B = setup(1, n=5, d=3)
    work = Workspace()
    for scale in (0.3, 1.0, 3.0, 30.0, 300.0):
        Xs = scale * X
        with np.errstate(all="raise"):
            v, F = inertial_parts(Xs, Y, A, B, work)
            energies = inertial_energies(Xs, Y, A, B)
        with np.errstate(over="ignore", under="ignore"):
            F_ref = inertial_force(Xs, Y, A, B)
            reference = (inertial_hamiltonian(Xs, Y, A, B), inertial_kinetic(Xs, Y, A, B),
                         inertial_dissipation(Xs, Y, A, B))
        np.testing.assert_allclose(v, inertial_velocity(Xs, Y, A, B), rtol=1e-12, atol=0)
        assert not np.any(np.isnan(F))
        finite = np.isfinite(F_ref)
        np.testing.assert_array_equal(np.isfinite(F), finite)
        np.testing.assert_array_equal(np.sign(F[~finite]), np.sign(F_ref[~finite]))
        np.testing.assert_allclose(F[finite], F_ref[finite], rtol=1e-11, atol=1e-300)
        assert energies == pytest.approx(reference, rel=1e-12)
    assert not np.all(finite)  # the largest scale overflows
