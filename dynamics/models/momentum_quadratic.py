"""Momentum on a quadratic: the base case of Part II (Theory page: "Momentum on a
quadratic"; paper 002 §3).

Every token is an independent particle in the bowl ``f(x) = ½ xᵀ A x`` (``A = Aᵀ ≻ 0``,
its eigenvalues ``a_k`` from ``kernel_diag``), with momentum ``y = ẋ``::

    ẋ_i = y_i,   ẏ_i = −α(t) y_i − ∇f(x_i),   y_i(0) = 0
    H = Σ_i ½|y_i|² + f(x_i),   dH/dt = −α(t) Σ_i |y_i|²

with the damping of the settings: ``α = c`` (heavy ball) or ``α = r/(t + t0) + c``
(Nesterov). ``t0 = 0`` (Su–Boyd–Candès's start) is allowed: ``α`` is infinite at
``t = 0``, but from rest ``y ≈ −t ∇f(x₀)/(1 + r)``, so the field there is its finite
limit ``ẏ(0) = −∇f(x₀)/(1 + r)``; the momenta must then start at rest.

Diagnostics: those of every Part II model, and ``suboptimality`` ``f − f*`` (``f* = 0``),
``dissipated`` ``∫₀ᵗ α|ẋ|² ds`` and ``energy_residual`` ``H(t) − H(0) + ∫₀ᵗ α|ẋ|² ds``
(the energy law, zero up to the scheme's error). The stepper is classical RK4, with the
dissipated energy integrated on the same stages; it meets the closed forms of
:mod:`dynamics.inertial.quadratic` to ~1e-13 at ``dt = 0.001`` over ``t ≤ 10``
(``tests/test_momentum_quadratic.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import diagnostics
from ..inertial.quadratic import gradient, objective
from ..state import State
from ..steppers.rk4 import RK4, StackedCarry, rk4_step
from . import part_two
from .registry import ModelSpec, register

#: The settings the model reads beyond the common ones (no value matrix: ``V`` is unused).
SETTINGS = ("kernel_diag", "matrix_draw", "cloud", "second_moment") + part_two.DAMPING_SETTINGS
#: The diagnostics it adds to :data:`dynamics.diagnostics.PART_TWO`.
EXTRA_DIAGNOSTICS = ("suboptimality", "dissipated", "energy_residual")


def force(prob, X, P=None, A=None):
    """``−∇f(x_i) = −A x_i``, shape (N, d)."""
    return -gradient(X, prob.A)


def velocity(prob, X, P, A=None):
    """``ẋ_i = ∂H/∂y_i = y_i``, shape (N, d)."""
    return P


def hamiltonian(prob, X, P, A=None):
    """``H = Σ_i ½|y_i|² + ½ x_iᵀ A x_i``."""
    return 0.5 * float(np.sum(P * P)) + objective(X, prob.A)


def gradient_flow(prob, X):
    """The gradient flow beside the damped motion: ``ẋ_i = −∇f(x_i)``, shape (N, d)."""
    return force(prob, X)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (y, −α(t) y − ∇f(x))``, each of shape (N, d); at ``t = 0`` with
    ``α = r/t + c`` (``t0 = 0``, momenta at rest) the limit ``Ẏ = −∇f(x)/(1 + r)``."""
    if prob.damping.singular and t == 0:
        return Y, force(prob, X) / (1.0 + prob.damping.r)
    return Y, -prob.damping.rate(t) * Y + force(prob, X)


@dataclass(frozen=True)
class QuadraticProblem(part_two.Problem):
    """The data of momentum on a quadratic and its fused field (``V`` unused)."""

    second_order: ClassVar[bool] = True
    dissipative: ClassVar[bool] = True
    singular_start: ClassVar[bool] = True
    symmetric: ClassVar[tuple] = ("A",)
    model: ClassVar[str] = "momentum_quadratic"

    def __post_init__(self):
        super().__post_init__()
        smallest = float(np.linalg.eigvalsh(self.A)[0])
        if smallest <= 0:
            raise ValueError(f"momentum_quadratic needs a positive definite A (f = ½ xᵀAx "
                             f"with its minimum at 0); A has the eigenvalue {smallest:.3g}")

    def alpha(self, t: float) -> float:
        """``α(t)`` as a float (``inf`` at the singular start)."""
        d = self.damping
        if d.kind == "constant" or d.r == 0:
            return d.c
        return d.r / (t + d.t0) + d.c if t + d.t0 > 0 else math.inf

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d)."""
        X, Y = y
        out = np.empty_like(y)
        out[0] = Y
        dY = np.matmul(X, self.A, out=out[1])
        if self.damping.singular and t == 0:
            dY /= -(1.0 + self.damping.r)
        else:
            dY += self.alpha(t) * Y
            np.negative(dY, out=dY)
        return out

    def energies(self, X, Y):
        """``(H, ½‖Y‖², ‖Y‖²)``: ``dH/dt = −α ‖Y‖²``."""
        kinetic = 0.5 * float(np.sum(Y * Y))
        return kinetic + objective(X, self.A), kinetic, 2.0 * kinetic

    def dissipation_rate(self, t: float, Y: np.ndarray) -> float:
        """``α(t) ‖Y‖²`` (its limit 0 at the singular start, where ``Y ≈ t Ẏ(0)``)."""
        if self.damping.singular and t == 0:
            return 0.0
        return self.alpha(t) * float(np.vdot(Y, Y))


class DissipationRK4(RK4):
    """Classical RK4 on ``(X, Y)`` that also integrates ``∫ α|Y|²`` (the state's
    ``dissipated``) on the same four stages: RK4 on the system with the energy
    ``q̇ = α(t)|Y|²`` appended, order 4 for both."""

    order = 4

    def step(self, st, carry, h):
        problem, work = self.problem, self.work
        rates = []

        def fun(t, z):
            rates.append(problem.dissipation_rate(t, z[1]))
            return problem.field(t, z, work)

        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            y = rk4_step(fun, st.t, carry.y, h)
            dissipated = st.dissipated + (h / 6.0) * (rates[0] + 2.0 * (rates[1] + rates[2])
                                                      + rates[3])
        return (State(t=st.t + h, X=y[0], P=y[1], dissipated=dissipated), StackedCarry(y))


def _at_rest(damping, Y) -> None:
    if damping.singular and np.any(Y):
        raise ValueError("nesterov_t0 must be > 0 for momenta that do not start at rest: "
                         "with t0 = 0, α = r/t is infinite at t = 0 (give no momenta)")


def _build(values, given):
    if "value" in given:
        raise ValueError("model 'momentum_quadratic' has no value matrix V: give no value")
    # the value diagonal is not read (any text will do): the generator draws as with it
    problem, state = part_two.build({**values, "value_diag": "1"}, given,
                                    problem_type=QuadraticProblem)
    _at_rest(problem.damping, state.P)
    return problem, state


def _reproblem(problem, state, values):
    problem, state = part_two.reproblem(problem, state, values)
    if state.t == 0:
        _at_rest(problem.damping, state.P)
    return problem, state


def _diagnostics(problem, state, energy0):
    """The Part II diagnostics, ``f − f*``, ``∫ α|ẋ|²`` and the energy law's residual."""
    diag, arrays = diagnostics.part_two(problem, state, energy0)
    if problem.damping.singular and state.t == 0:
        diag["dissipation_rate"] = 0.0  # α|ẋ|² → 0 at the start (α = ∞ times 0)
    diag["suboptimality"] = objective(state.X, problem.A)
    diag["dissipated"] = float(state.dissipated)
    diag["energy_residual"] = diag["hamiltonian"] - energy0 + float(state.dissipated)
    return diag, arrays


SPEC = register(ModelSpec(
    name="momentum_quadratic", part=2, title="Momentum on a quadratic",
    section="momentum_quadratic", settings=SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>Momentum on a quadratic</b> (the base case): each token in the bowl
$f(x) = \frac12 x^\top A x$, $f^* = 0$,
$$\ddot x_i + \alpha(t)\,\dot x_i + \nabla f(x_i) = 0, \qquad \dot x_i(0) = 0,$$
$H = \sum_i \frac12|\dot x_i|^2 + f(x_i)$, $\dfrac{dH}{dt} = -\alpha(t)\sum_i |\dot x_i|^2$.
Damping $\alpha = c$ (heavy ball) or $r/(t+t_0) + c$ (Nesterov; $t_0 = 0$ allowed: then
$\ddot x(0) = -\nabla f(x_0)/(1+r)$). Exact for $c = 0$, $t_0 = 0$:
$x_k(t) = x_k(0)\,\Gamma(\nu+1)(2/z)^\nu J_\nu(z)$, $\nu = \frac{r-1}2$,
$z = \sqrt{a_k}\,t$; and for $r \ge 3$,
$f - f^* \le (r-1)^2|x_0|^2/(2t^2)$.</p>""",
    look_for="f − f* under the 1/t² bound for Nesterov r = 3; on an ill-conditioned bowl "
             "Nesterov overshoots and oscillates yet leads early; H only decreases.",
    build=_build, reproblem=_reproblem, stepper=DissipationRK4, energy=part_two.energy,
    diagnostics=_diagnostics, check=part_two.check,
    readable={"velocity": velocity, "force": force, "hamiltonian": hamiltonian,
              "field": field, "reference": part_two.reference(field)},
))

__all__ = ["EXTRA_DIAGNOSTICS", "DissipationRK4", "QuadraticProblem", "SETTINGS", "SPEC",
           "field", "force", "gradient_flow", "hamiltonian", "velocity"]
