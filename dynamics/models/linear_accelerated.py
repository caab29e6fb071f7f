"""Accelerated linear attention (Theory page: "Accelerated linear attention").

Damped Hamiltonian particles with positions ``x_i`` and momenta ``y_i``::

    H = (1/2N) Σ_ij (x_iᵀ A x_j)(y_iᵀ y_j) − ½ Σ_i x_iᵀ V x_i
    ẋ_i = ∂H/∂y_i = (1/N) Σ_j (x_iᵀ A x_j) y_j
    ẏ_i = −α(t) y_i − ∂H/∂x_i = −α(t) y_i − (1/N) Σ_j (y_iᵀ y_j) A x_j + V x_i

Energy law: ``dH/dt = −α(t) Σ_i y_i·∂H/∂y_i ≤ 0``. ``A`` and ``V`` must be symmetric
(``H`` sees only their symmetric parts); a problem with others is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import diagnostics
from ..inertial.accelerated import (
    accelerated_dissipation,
    accelerated_force,
    accelerated_hamiltonian,
    accelerated_kinetic,
    accelerated_velocity,
)
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register


def velocity(prob, X, P, A=None):
    """``ẋ_i = ∂H/∂y_i = (1/N) Σ_j (x_iᵀ A x_j) y_j``, shape (N, d)."""
    return accelerated_velocity(X, P, prob.A)


def force(prob, X, P, A=None):
    """Conservative force ``−∂H/∂x_i = −(1/N) Σ_j (y_iᵀ y_j) A x_j + V x_i``, shape (N, d)."""
    return accelerated_force(X, P, prob.A, prob.V)


def hamiltonian(prob, X, P, A=None):
    """``H = (1/2N) Σ_ij (x_iᵀ A x_j)(y_iᵀ y_j) − ½ Σ_i x_iᵀ V x_i``."""
    return accelerated_hamiltonian(X, P, prob.A, prob.V)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (∂H/∂y, −α(t) y − ∂H/∂x)``, each of shape (N, d)."""
    return velocity(prob, X, Y), -prob.damping.rate(t) * Y + force(prob, X, Y)


@dataclass(frozen=True)
class AcceleratedProblem(part_two.Problem):
    """Accelerated linear attention's data and its fused field."""

    second_order: ClassVar[bool] = True
    dissipative: ClassVar[bool] = True
    symmetric: ClassVar[tuple] = ("A", "V")
    model: ClassVar[str] = "linear_accelerated"

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d), with ``G = XᵀY``
        shared by the velocity ``X A G / N`` and the force ``V x_i − Y Gᵀ A / N``."""
        X, Y = y
        G = X.T @ Y
        n = X.shape[0]
        dY = X @ self.V
        dY -= Y @ (G.T @ self.A) / n
        dY -= self.damping.rate(t) * Y
        return part_two.pack(X @ (self.A @ G) / n, dY)

    def energies(self, X, Y):
        return (accelerated_hamiltonian(X, Y, self.A, self.V),
                accelerated_kinetic(X, Y, self.A), accelerated_dissipation(X, Y, self.A))


def _build(values, given):
    return part_two.build(values, given, problem_type=AcceleratedProblem)


SPEC = register(ModelSpec(
    name="linear_accelerated", part=2, title="Accelerated linear attention",
    section="linear_accelerated", settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>Accelerated linear attention</b>: with
$H = \frac1{2N}\sum_{ij} (x_i^\top A x_j)(y_i^\top y_j) - \frac12\sum_i x_i^\top V x_i$,
$$\dot x_i = \frac{\partial H}{\partial y_i}, \qquad
\dot y_i = -\alpha(t)\, y_i - \frac{\partial H}{\partial x_i},$$
$y_i(0) = 0$. Energy law: $\dfrac{dH}{dt} = -\alpha(t)\sum_i y_i\cdot
\dfrac{\partial H}{\partial y_i} \le 0$. Damping $\alpha = c$ or $r/(t+t_0) + c$.</p>""",
    look_for="H only decreases; damping delays the blow-up of λₘₐₓ(S) past the "
             "first-order Tₘₐₓ.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=part_two.energy, diagnostics=diagnostics.part_two, subset_diagnostics=True,
    check=part_two.check,
    readable={"velocity": velocity, "force": force, "hamiltonian": hamiltonian,
              "field": field, "reference": part_two.reference(field)},
))

__all__ = ["AcceleratedProblem", "SPEC", "field", "force", "hamiltonian", "velocity"]
