"""The fixed-step schemes, one module each, and their contract (:mod:`.base`).

========================  =====  =============================================
scheme                    order  used by
========================  =====  =============================================
:class:`ExactLogit`       2      attention on a prescribed path
:class:`EtdVerlet`        2      value matching (canonical: :class:`TrackedEtdVerlet`)
:class:`Strang`           2      cotangent lift
:class:`Verlet`           2      reduced model (symplectic)
:class:`Heun`             2      first-order Transformer flow
:class:`ProjectedHeun`    2      Transformer flow on the sphere (projection)
:class:`RK4`              4      Part II (inertial attention lab), every model
========================  =====  =============================================
"""

from .base import DeferredOverflow, Stepper, TooStiff
from .etd_verlet import EtdVerlet
from .exact_logit import ExactLogit
from .heun import Heun
from .projected_heun import ProjectedHeun
from .rk4 import RK4
from .strang import Strang
from .tracked_verlet import TrackedEtdVerlet
from .verlet import Verlet

__all__ = ["DeferredOverflow", "EtdVerlet", "ExactLogit", "Heun", "ProjectedHeun", "RK4", "Stepper",
           "Strang", "TooStiff", "TrackedEtdVerlet", "Verlet"]
