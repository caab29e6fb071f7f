"""The first-order Transformer flow (Theory page: "First-order Transformer flow").

``Ẋ = A*(X) X W_Vᵀ``: the continuous-depth limit of residual attention layers; its
explicit-Euler step ``X + h A*(X) X W_Vᵀ`` is one residual attention layer. The energy
shown is the log-sum-exp potential ``Φ``; no energy law holds (the residual is n/a).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import clustering, diagnostics
from .. import energy as en
from ..steppers.heun import Heun
from . import part_one
from .registry import SLAVED_ZERO, ModelSpec, register


def velocity(prob, X):
    """``Ẋ = A*(X) X W_Vᵀ``, shape (N, d)."""
    A_star = en.softmax_attention(en.scores(X, prob.M), prob.beta)
    return A_star @ (X @ prob.W_V.T)


def rescaled_tokens(prob, X, t):
    """``z_i = e^{−t W_V} x_i``, shape (N, d): the frame in which the flow's clusters appear
    (Theory page: "Tokens on the sphere")."""
    return clustering.rescaled(X, prob.W_V, t)


def residual_layer(prob, X, h):
    """One residual attention layer ``X + h A*(X) X W_Vᵀ`` (explicit Euler)."""
    return X + h * velocity(prob, X)


@dataclass(frozen=True)
class TransformerProblem(part_one.SlavedProblem):
    """The first-order flow's data and its field at known attention."""

    def velocity(self, X, A):
        """``A X W_Vᵀ`` with ``A = A*(X)`` given: the twin of :func:`velocity`."""
        return A @ (X @ self.W_V.T)


def _energy(prob, state, log_a=None, S=None):
    return en.potential(diagnostics.scores_of(prob, state) if S is None else S, prob.beta)


def _build(values, given):
    return part_one.build(values, given, problem_type=TransformerProblem, momentum=False,
                          slaved=True, free_motion=False)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=_energy, slaved=True,
                                not_applicable=("energy_residual",), **subset)


#: ``(rhs, y0, unpack)`` for ``solve_ivp``, ``y = X.ravel()``.
_reference = part_one.first_order_reference(velocity)


SPEC = register(ModelSpec(
    name="transformer", part=1, title="First-order Transformer flow", section="transformer",
    settings=("cluster_eps",), energy_settings=("beta",),
    continue_settings=("dt", "cluster_eps"),
    equations=r"""
<p><b>First-order Transformer flow</b>: $$\dot X = A^*(X)\,X\,W_V^\top,$$
whose explicit-Euler step $X_{l+1} = X_l + h\,A^*(X_l) X_l W_V^\top$ is one residual
attention layer. The energy shown is $\Phi$; the energy residual is n/a.</p>""",
    look_for="Tokens move along the attention output; KL and D are zero.",
    build=_build, reproblem=part_one.reslave,
    stepper=Heun, energy=_energy, diagnostics=_diagnostics,
    not_applicable=("energy_residual",), energy_symbol="Φ", identically_zero=SLAVED_ZERO,
    readable={"reference": _reference, "velocity": velocity, "layer": residual_layer,
              "rescaled": rescaled_tokens},
))
