"""Helpers shared by the dashboard's fast-tier tests."""

import numpy as np

from app import Dashboard
from dynamics import Settings


def all_finite(source) -> bool:
    """Every numeric value in a ColumnDataSource is finite (colour strings skipped)."""
    for column in source.data.values():
        for value in column:
            try:
                arr = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                continue  # strings (colours)
            if not np.all(np.isfinite(arr)):
                return False
    return True


def sources(d):
    """Every ColumnDataSource a dashboard streams into."""
    return [*d.heatmaps.sources, d.timeseries.source, d.trajectories.trail,
            d.trajectories.tokens, d.trajectories.reference]


def play(d, ticks):
    """Call the periodic callback ``ticks`` times."""
    for _ in range(ticks):
        d.tick()


def small_dashboard():
    """A paused dashboard with N = 6, d = 3."""
    return Dashboard(settings=Settings(n_tokens=6, dim=3), playing=False)
