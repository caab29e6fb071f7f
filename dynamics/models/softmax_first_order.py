"""First-order softmax attention (Theory page: "First-order softmax attention").

``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j``: the first-order flow of softmax attention with
kernel ``A`` (any ``A`` and ``V``). No momenta, no ``H``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import diagnostics
from ..inertial.softmax import softmax_kernel, softmax_velocity
from ..steppers.rk4 import RK4
from . import part_two
from .registry import ModelSpec, register


def velocity(prob, X, P=None, A=None):
    """``v_i(X) = Σ_j softmax_j(x_iᵀ A x_j) V x_j``, shape (N, d) (rows of ``X Vᵀ`` are
    ``(V x_j)ᵀ``)."""
    return softmax_kernel(X, prob.A) @ (X @ prob.V.T)


def field(prob, t, X, Y):
    """``(Ẋ, Ẏ) = (v(X), 0)``, each of shape (N, d)."""
    return velocity(prob, X), np.zeros_like(Y)


@dataclass(frozen=True)
class SoftmaxProblem(part_two.Problem):
    """First-order softmax attention's data and its fused field."""

    softmax: ClassVar[bool] = True
    model: ClassVar[str] = "softmax_first_order"

    def field(self, t, y, work):
        """:func:`field` at ``y = (X, Y)`` stacked, shape (2, N, d): the weights from one
        product of width d + 1 and one exponential, rows shifted by a bound of their
        maxima when ``A`` is symmetric positive definite, else by the maxima
        (:func:`~dynamics.inertial.softmax.softmax_velocity`)."""
        return part_two.pack(softmax_velocity(y[0], self.A, self.V, work,
                                              spd=self.kernel_spd))


def _build(values, given):
    return part_two.build(values, given, problem_type=SoftmaxProblem)


SPEC = register(ModelSpec(
    name="softmax_first_order", part=2, title="First-order softmax attention",
    section="softmax_first_order", settings=part_two.SETTINGS, energy_settings=(),
    continue_settings=part_two.CONTINUE_SETTINGS,
    equations=r"""
<p><b>First-order softmax attention</b>:
$$\dot x_i = \sum_j \frac{e^{x_i^\top A x_j}}{\sum_k e^{x_i^\top A x_k}}\, V x_j.$$</p>""",
    look_for="Tokens cluster along the value directions; the attention map sharpens.",
    build=_build, reproblem=part_two.reproblem,
    stepper=RK4, energy=None, diagnostics=diagnostics.part_two, subset_diagnostics=True,
    check=part_two.check,
    readable={"velocity": velocity, "field": field, "reference": part_two.reference(field)},
))

__all__ = ["SPEC", "SoftmaxProblem", "field", "velocity"]
