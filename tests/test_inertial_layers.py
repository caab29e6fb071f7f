"""Attention layers and effective depth (MODEL.md §12)."""

import numpy as np
import pytest

from dynamics.inertial import (
    Damping,
    first_order_blowup_time,
    initial_cloud,
    layer_crossing,
    linear_velocity,
    run_layers,
)
from dynamics.inertial.layers import kick_damp_drift_layer

HS = (0.1, 0.05, 0.02, 0.01)


@pytest.mark.parametrize("scheme,damping", [
    ("residual", Damping("constant", 0.0)),
    ("euler", Damping("constant", 1.0)),
    ("kick_damp_drift", Damping("constant", 1.0)),
    ("euler", Damping("nesterov", 0.0, 3.0, 1.0)),
    ("kick_damp_drift", Damping("nesterov", 0.0, 3.0, 1.0)),
])
@pytest.mark.parametrize("theta", [2.0, 10.0])
def test_first_crossing_layer_near_prediction(scheme, damping, theta):
    rng = np.random.default_rng(0)
    X0 = initial_cloud("gaussian", 16, 2, 0.5, rng)
    A, V = np.diag([1.0, 0.5]), np.diag([1.0, 1.0])
    for h in HS:
        c = layer_crossing(X0, A, V, h, theta, scheme=scheme, damping=damping)
        assert c.predicted is not None and c.layer is not None
        assert c.predicted == int(np.ceil(c.crossing_time / h - 1e-9))
        assert abs(c.layer - c.predicted) <= 3, (h, c.layer, c.predicted)
        assert c.moments[c.layer] >= theta > c.moments[c.layer - 1]


def test_residual_crossing_time_matches_closed_form():
    rng = np.random.default_rng(1)
    X0 = initial_cloud("uniform_ellipsoid", 10, 2, 0.5, rng)
    c = layer_crossing(X0, np.diag([1.0, 0.5]), np.eye(2), 0.01, 10.0, scheme="residual")
    assert c.crossing_time == pytest.approx((1 - 0.5 / 10) / (2 * 0.5), rel=1e-8)


def test_no_crossing_when_V_negative():
    X0 = initial_cloud("gaussian", 6, 2, 0.5, np.random.default_rng(2))
    c = layer_crossing(X0, np.eye(2), -np.eye(2), 0.1, 2.0, scheme="kick_damp_drift",
                       t_max=5.0)
    assert c.predicted is None and c.layer is None and np.all(np.isfinite(c.moments))


def test_bounded_below_blowup_unbounded_above():
    """Below T_max the layer outputs converge as h → 0; at or past it they explode."""
    X0 = initial_cloud("gaussian", 8, 2, 0.5, np.random.default_rng(3))
    A, V = np.eye(2), np.eye(2)
    T = first_order_blowup_time(1, 1, 0.5)
    finals = []
    for h in (0.02, 0.01, 0.005, 0.0025):
        run = run_layers(X0, None, lambda X: linear_velocity(X, A, V), None, h,
                         int(round(0.8 * T / h)), scheme="residual")
        finals.append(run.S[-1, 0, 0])
    exact = 0.5 / (1 - 0.8)
    errors = np.abs(np.array(finals) - exact)
    assert np.all(np.diff(errors) < 0) and errors[-1] < 0.02 * exact
    peaks = []
    for h in (0.02, 0.01, 0.005):
        run = run_layers(X0, None, lambda X: linear_velocity(X, A, V), None, h,
                         int(round(1.3 * T / h)), scheme="residual", stop=1e8)
        peaks.append(run.S[-1].max())
    assert min(peaks) > 1e6


def test_kick_damp_drift_uses_exact_decay():
    d = Damping("nesterov", 0.5, 3.0, 1.0)
    X, Y = np.ones((3, 2)), np.full((3, 2), 2.0)
    sigma = d.decay(0.4, 0.1)
    X1, Y1 = kick_damp_drift_layer(X, Y, lambda X, Y: Y, lambda X, Y: 0 * Y, 0.1, sigma)
    np.testing.assert_allclose(Y1, 2.0 * np.exp(-(0.05 + 3 * np.log(1.5 / 1.4))))
    np.testing.assert_allclose(X1, X + 0.1 * Y1)
