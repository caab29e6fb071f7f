"""The momentum-only control of softmax attention (Theory page: "Momentum-only
softmax control").

Momentum added to the first-order softmax flow ``v(X)`` without a Hamiltonian::

    ẋ_i = y_i,   ẏ_i = −α(t) y_i + v_i(X),   v_i(X) = Σ_j softmax_j(x_iᵀ A x_j) V x_j.

No ``H``: frames report ``hamiltonian = 0`` and ``kinetic_energy = ½‖Y‖²``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import diagnostics
from ..inertial.softmax import softmax_velocity
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register
from .softmax_first_order import velocity as softmax_flow


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (y, −α(t) y + v(X))``, each of shape (N, d)."""
    return Y, -prob.damping.rate(t) * Y + softmax_flow(prob, X)


@dataclass(frozen=True)
class MomentumProblem(part_two.Problem):
    """The momentum-only control's data and its fused field."""

    second_order: ClassVar[bool] = True
    softmax: ClassVar[bool] = True
    model: ClassVar[str] = "softmax_momentum"

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d), ``v(X)`` as the
        first-order model's fused field computes it."""
        X, Y = y
        dY = softmax_velocity(X, self.A, self.V, work, spd=self.kernel_spd)
        dY -= self.damping.rate(t) * Y
        return part_two.pack(Y, dY)

    def energies(self, X, Y):
        """``(0, ½‖Y‖², ‖Y‖²)``: no ``H``; the kinetic part and ``Σ y·ẋ``."""
        k = 0.5 * float(np.sum(Y * Y))
        return 0.0, k, 2.0 * k


def _build(values, given):
    return part_two.build(values, given, problem_type=MomentumProblem)


SPEC = register(ModelSpec(
    name="softmax_momentum", part=2, title="Momentum-only softmax control",
    section="softmax_momentum", settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>Momentum-only control</b>: the first-order softmax velocity
$v_i(X) = \sum_j \mathrm{softmax}_j(x_i^\top A x_j)\, V x_j$ drives momenta,
$$\dot x_i = y_i, \qquad \dot y_i = -\alpha(t)\, y_i + v_i(X),$$
$y_i(0) = 0$. No Hamiltonian: the kinetic energy shown is $\frac12\|Y\|^2$.</p>""",
    look_for="Compare with the inertial model: momentum alone, without the kernel's "
             "Hamiltonian structure.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=None, diagnostics=diagnostics.part_two, subset_diagnostics=True,
    check=part_two.check,
    readable={"field": field, "reference": part_two.reference(field)},
))

__all__ = ["MomentumProblem", "SPEC", "field"]
