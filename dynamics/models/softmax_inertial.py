"""Inertial softmax attention (Theory page: "Inertial softmax attention").

Mean-field normalisation: with ``A = Aᵀ``, ``B = V A⁻¹`` symmetric positive definite,
``s_ij = x_iᵀ A x_j``, ``z_i = (1/N) Σ_j e^{s_ij}`` and ``r_i = y_iᵀ B y_i / z_i²``::

    H = ½ Σ_i y_iᵀ B y_i / z_i − (1/2N) Σ_ij e^{s_ij}
    ẋ_i = ∂H/∂y_i = B y_i / z_i
    ẏ_i = −α(t) y_i − ∂H/∂x_i = −α(t) y_i + (1/2N) Σ_j e^{s_ij} (r_i + r_j + 2) A x_j

Energy law: ``dH/dt = −α(t) Σ_i y_iᵀ B y_i / z_i ≤ 0``. Overdamped limit: from
``y(0) = 0``, on the clock ``τ = t/α``, the positions approach the first-order softmax
flow ``ẋ_i = Σ_j softmax_j(s_ij) V x_j`` (error ``O(1/α²)``). The momenta grow like
``z_i``: the run's stop test watches the velocities ``B y_i / z_i``, not ``‖Y‖``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import diagnostics
from ..inertial.softmax import (
    inertial_force,
    inertial_hamiltonian,
    inertial_measures,
    inertial_parts,
    inertial_velocity,
)
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register

#: Largest score ``x_iᵀ A x_j`` a run reaches before it stops (``e^650 ≈ 2e282``: room
#: for the factor N and a step's growth below the largest float, ``e^709``).
SCORE_LIMIT = 650.0


def velocity(prob, X, P, A=None):
    """``ẋ_i = ∂H/∂y_i = B y_i / z_i``, shape (N, d)."""
    return inertial_velocity(X, P, prob.A, prob.B)


def force(prob, X, P, A=None):
    """Conservative force ``−∂H/∂x_i = (1/2N) Σ_j e^{s_ij} (r_i + r_j + 2) A x_j``,
    shape (N, d)."""
    return inertial_force(X, P, prob.A, prob.B)


def hamiltonian(prob, X, P, A=None):
    """``H = ½ Σ_i y_iᵀ B y_i / z_i − (1/2N) Σ_ij e^{s_ij}``."""
    return inertial_hamiltonian(X, P, prob.A, prob.B)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (∂H/∂y, −α(t) y − ∂H/∂x)``, each of shape (N, d)."""
    return velocity(prob, X, Y), -prob.damping.rate(t) * Y + force(prob, X, Y)


@dataclass(frozen=True)
class InertialProblem(part_two.Problem):
    """Inertial softmax attention's data and its fused field (``A``, ``B`` symmetric)."""

    second_order: ClassVar[bool] = True
    dissipative: ClassVar[bool] = True
    softmax: ClassVar[bool] = True
    needs_ratio: ClassVar[bool] = True
    symmetric: ClassVar[tuple] = ("A", "B")
    model: ClassVar[str] = "softmax_inertial"
    watched: ClassVar[str] = "velocity norm ‖B y_i / z_i‖"

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d): velocity and force
        from one score product and one exponential
        (:func:`~dynamics.inertial.softmax.inertial_parts`)."""
        X, Y = y
        dX, dY = inertial_parts(X, Y, self.A, self.B, work, spd=self.kernel_spd)
        dY -= self.damping.rate(t) * Y
        return part_two.pack(dX, dY)

    def energies(self, X, Y):
        return self.measures(X, Y)[:3]

    def out_of_range(self, X):
        """A reason to stop once the largest score reaches :data:`SCORE_LIMIT`: ``z_i``
        and the momenta ``y_i ∝ z_i`` are then about to pass the largest float."""
        if self.kernel_spd:  # |x_iᵀ A x_j| ≤ max_k x_kᵀ A x_k (Cauchy–Schwarz)
            top = float(np.max(np.vecdot(X @ self.A, X)))
        else:
            top = float(np.max(X @ self.A @ X.T))
        if top < SCORE_LIMIT:
            return None
        return (f"the largest score x_iᵀ A x_j reached {top:.0f}: e^score (and the momenta, "
                "which grow like z_i) are about to pass the largest float (e^709), so the "
                "state cannot be carried further; a limit of floating point, not a "
                "blow-up of the dynamics")

    def measures(self, X, Y):
        """``(H, kinetic, Σ_i y_iᵀ B y_i / z_i, ‖(B y_i / z_i)_i‖)``."""
        return inertial_measures(X, Y, self.A, self.B, spd=self.kernel_spd)


def _build(values, given):
    return part_two.build(values, given, problem_type=InertialProblem)


SPEC = register(ModelSpec(
    name="softmax_inertial", part=2, title="Inertial softmax attention",
    section="softmax_inertial", settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>Inertial softmax attention</b> (mean-field normalisation): with
$B = VA^{-1} \succ 0$, $z_i = \frac1N\sum_j e^{x_i^\top A x_j}$ and
$H = \frac12\sum_i y_i^\top B y_i / z_i - \frac1{2N}\sum_{ij} e^{x_i^\top A x_j}$,
$$\dot x_i = \frac{\partial H}{\partial y_i} = \frac{B y_i}{z_i}, \qquad
\dot y_i = -\alpha(t)\, y_i - \frac{\partial H}{\partial x_i},$$
$y_i(0) = 0$. Energy law: $\dfrac{dH}{dt} = -\alpha(t)\sum_i y_i^\top B y_i/z_i
\le 0$. For large $\alpha$ the positions follow the first-order softmax flow on the
clock $t/\alpha$.</p>""",
    look_for="H only decreases; with strong damping the tokens follow the first-order "
             "flow slowed down α times, with little damping they overshoot.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=part_two.energy, diagnostics=diagnostics.part_two, subset_diagnostics=True,
    check=part_two.check,
    readable={"velocity": velocity, "force": force, "hamiltonian": hamiltonian,
              "field": field, "reference": part_two.reference(field)},
))

__all__ = ["InertialProblem", "SPEC", "field", "force", "hamiltonian", "velocity"]
