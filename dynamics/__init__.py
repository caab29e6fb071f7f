"""Nonequilibrium attention dynamics: the simulation backend (see MODEL.md).

Pure NumPy/SciPy; never imports Panel, Bokeh or HoloViews.
"""

from .frame import DIVERGED, FAILED, RUNNING, Frame
from .settings import MODELS, PART_I_MODELS, PART_II_MODELS, PATHS, Settings
from .simulation import DIAGNOSTICS, NOT_APPLICABLE, Simulation
from .trajectory import Trajectory, simulate

__all__ = [
    "DIAGNOSTICS", "DIVERGED", "FAILED", "Frame", "MODELS", "NOT_APPLICABLE",
    "PART_I_MODELS", "PART_II_MODELS", "PATHS", "RUNNING", "Settings", "Simulation",
    "Trajectory", "simulate",
]
