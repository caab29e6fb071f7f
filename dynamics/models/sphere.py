"""The normalised Transformer flow: tokens on the unit sphere (Theory page: "Tokens on
the sphere").

Layer normalisation keeps every token on the unit sphere; with ``P_x = I − x xᵀ``::

    ẋ_i = P_{x_i} Σ_j softmax_j(β x_iᵀ M x_j) W_V x_j        (softmax kernel)
    ẋ_i = P_{x_i} (1/N) Σ_j e^{β x_iᵀ M x_j} W_V x_j         (unnormalised kernel)

With ``M = W_V = I`` (the default, ``sphere_weights = "identity"``) the interaction
energy ``E_β = (1/2β) Σ_ij e^{β⟨x_i, x_j⟩}`` rises along both, to its maximum
``N² e^β/(2β)`` when all tokens meet in one cluster. The scheme is Heun's method
followed by the projection ``x_i ↦ x_i/‖x_i‖`` (:class:`ProjectedHeun`, order 2).

It is its own model rather than an option of the first-order flow
(:mod:`.transformer`): its state space, energy, scheme, diagnostics and Theory section all
differ, and a :class:`ModelSpec` names one of each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import clustering as cl
from .. import diagnostics
from .. import energy as en
from ..initial import draw_initial_data
from ..logits import centre_rows
from ..state import State
from ..steppers.projected_heun import ProjectedHeun
from . import part_one
from .registry import SLAVED_ZERO, ModelSpec, register

#: The two kernels of the flow (values of the ``sphere_kernel`` setting).
KERNELS = ("softmax", "unnormalised")


def attention_output(prob, X):
    """``Σ_j K_ij W_V x_j`` before the projection, shape (N, d): ``K = A*(X)`` (softmax
    kernel) or ``K_ij = (1/N) e^{β x_iᵀ M x_j}`` (unnormalised kernel)."""
    S = en.scores(X, prob.M)
    if prob.kernel == "unnormalised":
        K = np.exp(prob.beta * S) / X.shape[0]
    else:
        K = en.softmax_attention(S, prob.beta)
    return K @ (X @ prob.W_V.T)


def velocity(prob, X):
    """``ẋ_i = P_{x_i} Σ_j K_ij W_V x_j``, shape (N, d) (tangent at unit tokens)."""
    return cl.tangent_part(X, attention_output(prob, X))


def interaction_energy(prob, state, log_a=None, S=None):
    """``E_β = (1/2β) Σ_ij e^{β⟨x_i, x_j⟩}`` of the state's tokens."""
    return cl.interaction_energy(state.X, prob.beta)


@dataclass(frozen=True)
class SphereProblem(part_one.SlavedProblem):
    """The normalised flow's data: ``M``, ``W_V``, β and the kernel."""

    kernel: str = "softmax"

    def field(self, X):
        """The vector field :func:`velocity` at ``X`` (N, d).

        Raises ``FloatingPointError`` (the engine stops the run with its message) when
        β was raised above :data:`~dynamics.clustering.BETA_MAX` during the run.
        """
        if self.beta > cl.BETA_MAX:
            raise FloatingPointError(_beta_message(self.beta))
        return velocity(self, X)

    def retract(self, X):
        """Every token back on the sphere, ``x_i / ‖x_i‖``."""
        return cl.unit_rows(X)


def _beta_message(beta):
    return (f"beta must be in [0.001, {cl.BETA_MAX:g}] for the sphere model (e^β "
            f"overflows beyond), got {beta:g}")


def _checked_beta(beta):
    if beta > cl.BETA_MAX:
        raise ValueError(_beta_message(beta))
    return float(beta)


def _build(values, given):
    """Unit tokens (given features are normalised), ``M = W_V = I`` or drawn from the seed
    (``sphere_weights``), or your own ``score_matrix`` and ``value_matrix``. A real head
    (``weights="minilm"``) is refused: its constant feature column has no place on the
    sphere."""
    for name, plain in (("weights", "seed"), ("heads", "one")):
        if values.get(name, plain) != plain:
            raise ValueError(f"{name} must be {plain!r} for the sphere model (a real head's "
                             "constant feature column has no place on the sphere); give "
                             "your own score_matrix and value_matrix instead")
    part_one.refuse_unused(values, given, momentum=False, slaved=True)
    beta = _checked_beta(values["beta"])
    N, d = values["n_tokens"], values["dim"]
    data = draw_initial_data(N, d, values["seed"])
    X = cl.unit_rows(given.get("features", data.X))  # Gaussian directions by default
    if values["sphere_weights"] == "identity":
        M, W_V = np.eye(d), np.eye(d)
    else:
        M, W_V = data.M, data.W_V
    M, W_V = given.get("score_matrix", M), given.get("value_matrix", W_V)
    prob = SphereProblem(M=M, W_V=W_V, beta=beta, gamma=1.0, kernel=values["sphere_kernel"])
    S = en.scores(X, M)
    Z = centre_rows(beta * S)
    return prob, State(t=0.0, X=X, P=np.zeros((N, d)), Z=Z, A=en.rowsoftmax(Z), S=S,
                       S_dot=np.zeros((N, N)), B=np.zeros(N))


def _reproblem(prob, state, values):
    """A change of β (protocol work on ``E_β``), of the kernel or of ε (read by the
    clustering view only): the same tokens.
    (β above ``BETA_MAX`` stops the run at its next step, with a message naming β.)"""
    prob = replace(prob, kernel=values["sphere_kernel"])
    return part_one.reslave(prob, state, values)


def _diagnostics(prob, state, energy0, **subset):
    """The Part I diagnostics (``hamiltonian`` is ``E_β``); the clusters of a state are
    :func:`dynamics.clustering.cluster_labels` of its tokens at ε = ``cluster_eps``."""
    return diagnostics.part_one(prob, state, energy0, energy=interaction_energy,
                                slaved=True, not_applicable=("energy_residual",), **subset)


#: ``(rhs, y0, unpack)`` for ``solve_ivp`` (the projected field on the sphere), ``y = X.ravel()``.
_reference = part_one.first_order_reference(velocity)


SPEC = register(ModelSpec(
    name="sphere", part=1, title="Transformer flow on the sphere", section="sphere",
    settings=("sphere_kernel", "sphere_weights", "cluster_eps"), energy_settings=("beta",),
    continue_settings=("dt", "sphere_kernel", "cluster_eps"),
    equations=r"""
<p><b>Tokens on the sphere</b> (layer normalisation, $P_x = I - x x^\top$):
$$\dot x_i = P_{x_i} \sum_j \mathrm{softmax}_j(\beta\, x_i^\top M x_j)\, W_V x_j
\quad\text{or}\quad \dot x_i = P_{x_i} \tfrac1N \sum_j e^{\beta\, x_i^\top M x_j}\, W_V x_j.$$
With $M = W_V = I$ the interaction energy
$E_\beta = \tfrac{1}{2\beta}\sum_{ij} e^{\beta\langle x_i, x_j\rangle}$ rises to
$N^2 e^\beta/(2\beta)$, reached when all tokens form one cluster.</p>""",
    look_for="With M = Wᵥ = I (the default) Eᵦ rises and tokens merge into clusters; "
             "at large β several clusters persist a long time before merging.",
    build=_build, reproblem=_reproblem,
    stepper=ProjectedHeun, energy=interaction_energy, diagnostics=_diagnostics,
    not_applicable=("energy_residual",), energy_symbol="Eᵦ", identically_zero=SLAVED_ZERO,
    real_heads="none",
    readable={"reference": _reference, "velocity": velocity,
              "interaction_energy": interaction_energy},
))
