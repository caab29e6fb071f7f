"""Nonequilibrium attention dynamics: the simulation backend.

Pure NumPy/SciPy; never imports Panel, Bokeh or HoloViews. The models live in
:mod:`dynamics.models` (one module each, and their registry), the schemes in
:mod:`dynamics.steppers`, the loop in :mod:`dynamics.simulation`.
"""

from . import models
from .frame import DIVERGED, FAILED, RUNNING, Frame
from .models import DIAGNOSTICS
from .settings import MODELS, PART_I_MODELS, PART_II_MODELS, PATHS, Settings
from .simulation import Change, Simulation
from .state import State
from .trajectory import Trajectory, simulate

#: Diagnostics each registered model does not define (reported as NaN), at import.
NOT_APPLICABLE = {s.name: s.not_applicable for s in models.specs() if s.not_applicable}

__all__ = [
    "Change", "DIAGNOSTICS", "DIVERGED", "FAILED", "Frame", "MODELS", "NOT_APPLICABLE",
    "PART_I_MODELS", "PART_II_MODELS", "PATHS", "RUNNING", "Settings", "Simulation", "State",
    "Trajectory", "models", "simulate",
]
