"""Shared test setup: NumPy floating-point errors raise; Hypothesis has no deadline.

Plain helper functions shared by test modules are in ``helpers.py``.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=40,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")


@pytest.fixture(autouse=True)
def _floating_point_errors_raise():
    """Overflow, invalid operations and division by zero raise in every test."""
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        yield


@pytest.fixture
def dash():
    """A paused dashboard with N = 6, d = 3 (imported here, not at the top, so that
    the backend's tests still collect when ``app`` does not import)."""
    from dashboard_support import small_dashboard

    return small_dashboard()

