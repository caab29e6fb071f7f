"""The attention-only model: Fisher–Rao relaxation on a prescribed feature path
(Theory page: "Attention on a prescribed path").

Features follow a closed-form path ``X(t)``; attention relaxes by the Fisher–Rao flow of
the free energy, in logits ``dZ/dt = γ S(X(t)) − λ Z``, ``λ = γ/β``. The energy balance
is ``dF/dt = −⟨A, dS/dt⟩ − D``.
"""

from __future__ import annotations

from types import MappingProxyType

from .. import diagnostics
from .. import energy as en
from ..steppers.exact_logit import ExactLogit
from . import part_one
from .registry import ModelSpec, register

#: Which prescribed paths (``Settings.path``) use each path setting: ω turns the rotation
#: and the oscillation; δ sizes the oscillation, the drift, the switch and the converging
#: path's offset ``X_∞ − X_0``; ``t_s`` is the switch's time and μ the converging rate.
PATH_USES = MappingProxyType({
    "omega": ("rotation", "oscillation"),
    "amplitude": ("oscillation", "drift", "switch", "converging"),
    "switch_time": ("switch",),
    "settle_rate": ("converging",),
})


def logit_velocity(prob, t, Z):
    """``dZ/dt = γ S(X(t)) − λ Z``, shape (N, N)."""
    X, _ = prob.path(t)
    return prob.gamma * en.scores(X, prob.M) - prob.relaxation_rate * Z


def free_energy(prob, state, log_a=None, S=None):
    """The energy of the balance: ``F(A; X)``."""
    S = diagnostics.scores_of(prob, state) if S is None else S
    return en.free_energy(state.A, S, prob.beta, log_a)


def _build(values, given):
    return part_one.build(values, given, path=True, momentum=False, tracked=True,
                          free_motion=False)


def _diagnostics(prob, state, energy0, **subset):
    return diagnostics.part_one(prob, state, energy0, energy=free_energy, attention_only=True,
                                **subset)


def reference(prob, state):
    """``(rhs, y0, unpack)`` for ``solve_ivp``: the logits, ``y = Z.ravel()``."""
    N = state.Z.shape[0]

    def rhs(t, y):
        return logit_velocity(prob, t, y.reshape(N, N)).ravel()

    def unpack(y):
        return {"Z": y.reshape(N, N)}

    return rhs, state.Z.ravel().copy(), unpack


SPEC = register(ModelSpec(
    name="attention", part=1, title="Attention on a prescribed path", section="attention",
    settings=("gamma", "logit_noise", "init_attention", *part_one.PATH_SETTINGS),
    continue_settings=("dt", "gamma", "logit_noise"),
    energy_settings=("beta",),
    equations=r"""
<p><b>Prescribed path</b> $X(t)$; attention relaxes by the Fisher–Rao flow, in logits
$$\dot Z = \gamma\, S(X(t)) - \lambda Z, \qquad \lambda = \gamma/\beta.$$
Energy balance:
$$\frac{d}{dt}F(A(t);X(t)) = -\langle A, \dot S\rangle - D.$$
Tracking bound: $\mathrm{osc}(W_i) \le B_i$,
$\dot B_i = -\lambda B_i + \beta\,\mathrm{osc}(\dot S_i)$,
so $\sum_i \mathrm{KL}(A_i\|A^*_i) \le \sum_i B_i^2/8$.</p>""",
    look_for="At fixed features KL decays like exp(−2λt); moving features leave a lag.",
    energy_symbol="F",
    build=_build, reproblem=part_one.retrack_on_path,
    stepper=ExactLogit, energy=free_energy, diagnostics=_diagnostics,
    readable={"reference": reference, "field": logit_velocity},
))

__all__ = ["PATH_USES", "SPEC", "free_energy", "logit_velocity", "reference"]
