"""The models, one module each, and their registry.

Each module writes its model as on the Theory page (readable vector field, forces and
energies), puts a fused kernel beside its readable twin where one pays, and registers a
:class:`~dynamics.models.registry.ModelSpec`. Everything else reads the registry:

>>> from dynamics import models
>>> models.names(part=1)[:2]
('attention', 'canonical')
"""

import importlib

from ..diagnostics import PART_ONE as DIAGNOSTICS
from .part_one import PATH_SETTINGS, Problem
from .registry import COMMON_SETTINGS, ModelSpec, get, names, on_change, register, specs, unregister

#: The model modules, in the order of the Theory page (each registers its model).
MODULES = (
    "attention", "canonical", "value_matching", "cotangent_lift", "reduced", "transformer",
    "sphere",
    "momentum_quadratic", "linear", "linear_accelerated", "softmax_first_order", "softmax_inertial",
    "softmax_momentum",
)
for _module in MODULES:
    importlib.import_module(f"{__name__}.{_module}")

__all__ = [
    "COMMON_SETTINGS", "DIAGNOSTICS", "ModelSpec", "PATH_SETTINGS", "Problem", "get", "names",
    "on_change", "register", "specs", "unregister",
]
