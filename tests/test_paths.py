"""Prescribed feature paths (MODEL.md §6): closed-form velocities, invariants, limits."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamics import PATHS
from dynamics.paths import FeaturePath


def make_path(kind, seed, N, d, omega=1.3, amplitude=0.7, switch_time=1.0, settle_rate=0.8):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return FeaturePath(kind=kind, X0=rng.standard_normal((N, d)),
                       Y=rng.standard_normal((N, d)), Q=Q, omega=omega,
                       amplitude=amplitude, switch_time=switch_time, settle_rate=settle_rate)


path_args = dict(kind=st.sampled_from(PATHS), seed=st.integers(0, 2**32 - 1),
                 N=st.integers(2, 8), d=st.integers(1, 5),
                 omega=st.floats(0.0, 5.0), amplitude=st.floats(0.0, 3.0),
                 settle_rate=st.floats(1e-2, 5.0), t=st.floats(1e-3, 5.0))


@given(**path_args)
def test_velocity_matches_central_difference(kind, seed, N, d, omega, amplitude,
                                             settle_rate, t):
    """dX/dt of every path equals a central finite difference of X(t)."""
    path = make_path(kind, seed, N, d, omega, amplitude, switch_time=10.0,
                     settle_rate=settle_rate)
    eps = 1e-5
    X_plus, _ = path(t + eps)
    lo = max(t - eps, 0.0)
    X_minus, _ = path(lo)
    fd = (X_plus - X_minus) / (t + eps - lo)
    _, X_dot = path(t)
    scale = 1.0 + np.abs(path.X0).max() + amplitude * np.abs(path.Y).max()
    rate = max(omega, settle_rate, 1.0)
    np.testing.assert_allclose(fd, X_dot, rtol=0, atol=1e-8 * scale * rate**3 + 1e-9 * scale)


@given(**path_args)
def test_paths_start_at_x0(kind, seed, N, d, omega, amplitude, settle_rate, t):
    path = make_path(kind, seed, N, d, omega, amplitude, settle_rate=settle_rate)
    X, X_dot = path(0.0)
    assert X.shape == X_dot.shape == (N, d)
    np.testing.assert_allclose(X, path.X0, rtol=0, atol=1e-13 * (1 + np.abs(path.X0).max()))


@given(seed=st.integers(0, 2**32 - 1), N=st.integers(2, 8), d=st.integers(1, 5),
       omega=st.one_of(st.just(0.0), st.floats(1e-3, 10.0)), t=st.floats(0.0, 100.0))
def test_rotation_preserves_each_token_norm_and_speed(seed, N, d, omega, t):
    path = make_path("rotation", seed, N, d, omega=omega)
    X, X_dot = path(t)
    n0 = np.linalg.norm(path.X0, axis=1)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), n0, rtol=1e-12, atol=1e-13)
    # rigid rotation: velocity orthogonal to position; all Gram entries preserved
    np.testing.assert_allclose(np.sum(X * X_dot, axis=1), 0.0, atol=1e-12 * (1 + omega)
                               * (1 + n0.max() ** 2))
    np.testing.assert_allclose(X @ X.T, path.X0 @ path.X0.T, rtol=0,
                               atol=1e-12 * (1 + n0.max() ** 2))
    if d >= 2 and omega > 0:
        # one full turn returns to X0
        Xp, _ = path(2 * np.pi / omega)
        np.testing.assert_allclose(Xp, path.X0, rtol=0, atol=1e-10 * (1 + n0.max()))


#: Absolute slack of a bound computed in floating point: a product that underflows
#: into subnormals has no relative accuracy (Hypothesis found amplitude = 5e-324).
_ROUNDING_FLOOR = 4 * np.finfo(float).smallest_subnormal


@given(seed=st.integers(0, 2**32 - 1), N=st.integers(2, 8), d=st.integers(1, 5),
       settle_rate=st.floats(0.1, 5.0), amplitude=st.floats(0.0, 3.0))
def test_converging_path_settles_to_its_limit(seed, N, d, settle_rate, amplitude):
    """X(t) = X_∞ + e^{−μt}(X_0 − X_∞) → X_∞ and dX/dt → 0 exponentially."""
    path = make_path("converging", seed, N, d, amplitude=amplitude, settle_rate=settle_rate)
    X_inf = path.X0 + amplitude * path.Y
    for t in (1.0, 5.0):
        X, X_dot = path(t)
        expected = X_inf + np.exp(-settle_rate * t) * (path.X0 - X_inf)
        np.testing.assert_allclose(X, expected, rtol=0, atol=1e-13 * (1 + np.abs(X_inf).max()))
        assert np.abs(X_dot).max() <= settle_rate * np.exp(-settle_rate * t) * amplitude \
            * np.abs(path.Y).max() * (1 + 1e-12) + _ROUNDING_FLOOR
    X_late, X_dot_late = path(60.0 / settle_rate)
    np.testing.assert_allclose(X_late, X_inf, rtol=0, atol=1e-12 * (1 + np.abs(X_inf).max()))


@pytest.mark.parametrize("kind", ["oscillation", "drift"])
def test_oscillation_and_drift_closed_forms(kind):
    path = make_path(kind, 3, 4, 3, omega=2.0, amplitude=0.5)
    for t in (0.3, 1.7):
        X, X_dot = path(t)
        if kind == "oscillation":
            np.testing.assert_allclose(X, path.X0 + 0.5 * np.sin(2 * t) * path.Y, atol=1e-14)
            np.testing.assert_allclose(X_dot, np.cos(2 * t) * path.Y, atol=1e-14)
        else:
            np.testing.assert_allclose(X, path.X0 + 0.5 * t * path.Y, atol=1e-14)
            np.testing.assert_allclose(X_dot, 0.5 * path.Y, atol=1e-14)


def test_static_and_switch_paths():
    static = make_path("static", 1, 3, 2)
    switch = make_path("switch", 1, 3, 2, amplitude=0.9, switch_time=1.5)
    assert static.jumps == () and switch.jumps == (1.5,)
    for t in (0.0, 0.7, 3.0):
        X, X_dot = static(t)
        np.testing.assert_array_equal(X, static.X0)
        np.testing.assert_array_equal(X_dot, 0.0)
    np.testing.assert_array_equal(switch(1.4999)[0], switch.X0)
    # right-continuous at the jump
    np.testing.assert_allclose(switch(1.5)[0], switch.X0 + 0.9 * switch.Y, atol=1e-15)
    np.testing.assert_allclose(switch(7.0)[0], switch.X0 + 0.9 * switch.Y, atol=1e-15)
    np.testing.assert_array_equal(switch(7.0)[1], 0.0)


def test_unknown_path_is_refused():
    with pytest.raises(ValueError, match="unknown path"):
        make_path("spiral", 0, 3, 2)(0.0)
