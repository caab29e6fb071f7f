"""The Sweep tab's shipped example: the lag amplitude of the attention-only model on the
oscillation path over β × γ (``assets/data/sweep_example.json``), shown when the tab opens.

Regenerate it after a change of the dynamics with
``python -c "from app.sweeps.example import write_example; write_example()"`` (its test
checks cells of it against fresh runs).
"""

from __future__ import annotations

import json

import numpy as np

from app.serving.resources import asset
from dynamics import Settings, SweepRun

from .grid import axis_values

#: The example shown when the tab opens (:func:`write_example`).
EXAMPLE = asset("data", "sweep_example.json")
#: The example's choices (the tab's controls) and its base settings (the defaults).
EXAMPLE_CHOICES = {"model": "attention", "path": "oscillation", "x": "beta", "x_start": 0.3,
                   "x_end": 3.0, "x_log": True, "y": "gamma", "y_start": 0.1, "y_end": 10.0,
                   "y_log": True, "cells": 8, "metric": "lag_amplitude", "t_end": 5.0}
#: What the example is, and how to run one's own.
EXAMPLE_TEXT = (
    "**Example shown at first** (precomputed, shipped with the app): the lag amplitude of "
    "the attention-only model on the oscillation path over β × γ, dashed: the two-source "
    "theory's contours (Theory page, tracking the moving softmax). **Your own:** choose a "
    "model, two settings, their ranges and a metric on the left and press **Run** (the "
    "other settings are the main tab's); click a cell to load it into the live view.")


def example_grid() -> tuple[dict, dict]:
    """The example's base settings and grid (:data:`EXAMPLE_CHOICES`)."""
    c = EXAMPLE_CHOICES
    base = Settings(model=c["model"], path=c["path"]).values()
    grid = {c["x"]: axis_values(c["x_start"], c["x_end"], c["cells"], c["x_log"]),
            c["y"]: axis_values(c["y_start"], c["y_end"], c["cells"], c["y_log"])}
    return base, grid


def write_example(path=None, client=None) -> dict:
    """Run the example sweep and write it (JSON) to ``path`` (default: the repository's
    ``assets/data/sweep_example.json``); returns what was written."""
    c = EXAMPLE_CHOICES
    base, grid = example_grid()
    run = SweepRun(Settings(**base), grid, c["t_end"], [c["metric"]], client=client)
    ds = run.run()
    values = ds[c["metric"]].transpose(c["y"], c["x"]).values
    status = ds["status"].transpose(c["y"], c["x"]).values
    example = {"choices": c, "base": base, "x_values": grid[c["x"]],
               "y_values": grid[c["y"]],
               "values": [[v if np.isfinite(v) else None for v in row] for row in values],
               "status": [[str(v) for v in row] for row in status]}
    if path is None:
        path = EXAMPLE
    with open(path, "w") as f:
        json.dump(example, f, indent=0)
        f.write("\n")
    return example


def read_example() -> dict | None:
    """The shipped example (:func:`write_example`), or None when it cannot be read."""
    try:
        return json.loads(EXAMPLE.read_text())
    except (OSError, ValueError):
        return None
