"""First-order linear attention (Theory page: "First-order linear attention").

Tokens move along a bilinear kernel, ``ẋ_i = V S A x_i`` with ``S = (1/N) Σ_j x_j x_jᵀ``
(any ``A``, ``V``); for symmetric ones the second moment obeys the closed Riccati system
``Ṡ = V S A S + S A S V`` and blows up at ``T_max = min_{v_k > 0} 1/(2 a_k v_k s_k)`` for
commuting data. No momenta, no ``H``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import diagnostics
from ..inertial.linear import linear_velocity
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register


def velocity(prob, X, P=None, A=None):
    """``ẋ_i = V S A x_i``, shape (N, d) (``X`` of shape (N, d))."""
    return linear_velocity(X, prob.A, prob.V)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (V S A x_i, 0)``, each of shape (N, d)."""
    return velocity(prob, X), np.zeros_like(Y)


@dataclass(frozen=True)
class LinearProblem(part_two.Problem):
    """First-order linear attention's data and its field on the stacked state."""

    model: ClassVar[str] = "linear"

    def field(self, t, y, work):
        """``(V S A x_i, 0)`` at ``y = (X, Y)``, shape (2, N, d): :func:`field` stacked."""
        return part_two.pack(linear_velocity(y[0], self.A, self.V))


def _build(values, given):
    return part_two.build(values, given, problem_type=LinearProblem)


SPEC = register(ModelSpec(
    name="linear", part=2, title="First-order linear attention", section="linear",
    settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>First-order linear attention</b>: $$\dot x_i = V S A\, x_i,\qquad
S = \frac1N \sum_j x_j x_j^\top,$$ so that $\dot S = VSAS + SASV$. For commuting $A$, $V$,
$S(0)$ the moments blow up at $T_{\max} = \min_{v_k>0} 1/(2 a_k v_k s_k)$.</p>""",
    look_for="λₘₐₓ(S) grows like 1/(Tₘₐₓ − t) and the run stops near Tₘₐₓ.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=None, diagnostics=diagnostics.part_two, subset_diagnostics=True,
    check=part_two.check,
    readable={"velocity": velocity, "field": field, "reference": part_two.reference(field)},
))

__all__ = ["LinearProblem", "SPEC", "field", "velocity"]
