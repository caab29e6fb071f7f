"""Nonequilibrium attention dynamics: the simulation backend.

Pure NumPy/SciPy; never imports Panel, Bokeh or HoloViews. The models live in
:mod:`dynamics.models` (one module each, and their registry), the schemes in
:mod:`dynamics.steppers`, the loop in :mod:`dynamics.simulation`.
"""

from . import models
from . import settings as _settings
from .batch import simulate_batch
from .frame import DIVERGED, FAILED, RUNNING, Frame
from .models import DIAGNOSTICS
from .protocol import Change
from .settings import PATHS, Settings
from .simulation import Simulation
from .state import State
from .sweeps import SweepRun, sweep
from .trajectory import Trajectory, simulate


def __getattr__(name):
    """``MODELS``, ``PART_I_MODELS``, ``PART_II_MODELS`` and ``NOT_APPLICABLE`` (diagnostics
    each model does not define), read from the registry at each access."""
    if name == "NOT_APPLICABLE":
        return {s.name: s.not_applicable for s in models.specs() if s.not_applicable}
    if name in ("MODELS", "PART_I_MODELS", "PART_II_MODELS"):
        return getattr(_settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Change", "DIAGNOSTICS", "DIVERGED", "FAILED", "Frame", "MODELS", "NOT_APPLICABLE",
    "PART_I_MODELS", "PART_II_MODELS", "PATHS", "RUNNING", "Settings", "Simulation", "State",
    "SweepRun", "Trajectory", "models", "simulate", "simulate_batch", "sweep",
]
