"""Inertial softmax attention (Theory page: "Inertial softmax attention").

With ``B = V A⁻¹`` symmetric positive definite, ``z_i = Σ_j e^{x_iᵀ A x_j}``,
``q_i = y_iᵀ B y_i`` and ``r_i = q_i / z_i²``::

    H = (N/2) [Σ_i q_i / z_i − Σ_ij e^{x_iᵀ A x_j}]
    ẋ_i = ∂H/∂y_i = N B y_i / z_i
    ẏ_i = −α(t) y_i − ∂H/∂x_i = −α(t) y_i + (N/2) Σ_j e^{x_iᵀ A x_j} (r_i + r_j + 2) A x_j

Energy law: ``dH/dt = −α(t) N Σ_i q_i / z_i ≤ 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..inertial.softmax import (
    inertial_energies,
    inertial_force,
    inertial_hamiltonian,
    inertial_parts,
    inertial_velocity,
)
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register


def velocity(prob, X, P, A=None):
    """``ẋ_i = ∂H/∂y_i = N B y_i / z_i``, shape (N, d)."""
    return inertial_velocity(X, P, prob.A, prob.B)


def force(prob, X, P, A=None):
    """Conservative force ``−∂H/∂x_i = (N/2) Σ_j e^{x_iᵀ A x_j} (r_i + r_j + 2) A x_j``,
    shape (N, d)."""
    return inertial_force(X, P, prob.A, prob.B)


def hamiltonian(prob, X, P, A=None):
    """``H = (N/2) [Σ_i y_iᵀ B y_i / z_i − Σ_ij e^{x_iᵀ A x_j}]``."""
    return inertial_hamiltonian(X, P, prob.A, prob.B)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (∂H/∂y, −α(t) y − ∂H/∂x)``, each of shape (N, d)."""
    return velocity(prob, X, Y), -prob.damping.rate(t) * Y + force(prob, X, Y)


@dataclass(frozen=True)
class InertialProblem(part_two.Problem):
    """Inertial softmax attention's data and its fused field."""

    second_order: ClassVar[bool] = True
    dissipative: ClassVar[bool] = True
    softmax: ClassVar[bool] = True
    needs_ratio: ClassVar[bool] = True

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d): velocity and force
        from one score product and one exponential
        (:func:`~dynamics.inertial.softmax.inertial_parts`)."""
        X, Y = y
        dX, dY = inertial_parts(X, Y, self.A, self.B, work)
        dY -= self.damping.rate(t) * Y
        return part_two.pack(dX, dY)

    def energies(self, X, Y):
        return inertial_energies(X, Y, self.A, self.B)


def _build(values, given):
    return part_two.build(values, given, problem_type=InertialProblem)


SPEC = register(ModelSpec(
    name="softmax_inertial", part=2, title="Inertial softmax attention",
    section="softmax_inertial", settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>Inertial softmax attention</b>: with $B = VA^{-1} \succ 0$,
$z_i = \sum_j e^{x_i^\top A x_j}$ and
$H = \frac N2\big[\sum_i y_i^\top B y_i / z_i - \sum_{ij} e^{x_i^\top A x_j}\big]$,
$$\dot x_i = \frac{\partial H}{\partial y_i} = \frac{N B y_i}{z_i}, \qquad
\dot y_i = -\alpha(t)\, y_i - \frac{\partial H}{\partial x_i},$$
$y_i(0) = 0$. Energy law: $\dfrac{dH}{dt} = -\alpha(t)\, N\sum_i y_i^\top B y_i/z_i
\le 0$.</p>""",
    look_for="H only decreases and is unbounded below: the momenta run away and the run "
             "stops.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=part_two.energy, diagnostics=part_two.diagnostics,
    check=part_two.check,
    readable={"velocity": velocity, "force": force, "hamiltonian": hamiltonian,
              "field": field, "reference": part_two.reference(field)},
))

__all__ = ["InertialProblem", "SPEC", "field", "force", "hamiltonian", "velocity"]
