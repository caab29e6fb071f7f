"""Several heads (Theory page: "Several heads"): the canonical model of one layer with all
its heads, ``heads="all"``.

A layer with heads ``h = 1…H`` has one score matrix ``M_h`` and one attention ``A_h``
per head; the free energy is the sum of the heads' free energies,

    H = ‖P‖²/(2m) + Σ_h F(A_h; X, M_h) + (k/2)‖X‖²,

every ``A_h`` relaxes by its own Fisher–Rao flow (``dZ_h/dt = γ S_h − λ Z_h``,
``S_h = X M_h Xᵀ``) and the features feel the summed force

    Ẋ = P/m,   Ṗ = Σ_h (A_h X M_hᵀ + A_hᵀ X M_h) − kX.

Energy–dissipation law: ``dH/dt = −γ Σ_h Σ_i Var_{A_h,i}(C_h,i) ≤ 0``.

Arrays carry the heads first: ``M`` (H, d, d), ``Z``, ``A``, ``S`` (H, N, N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import log_softmax, softmax

from .. import real_heads
from ..diagnostics import select
from ..energy import oscillation
from ..initial import draw_initial_data
from ..state import State
from ..steppers.base import Stepper
from . import part_one


@dataclass(frozen=True)
class MultiHeadProblem(part_one.Problem):
    """The data of a multi-head run: ``M`` and ``W_V`` stacked over heads, shape
    (H, d, d); ``shown`` is the head whose attention the frame shows as ``attention``."""

    shown: int = 0


def scores(X, M):
    """``S_h = X M_h Xᵀ`` of every head, shape (H, N, N)."""
    return (X @ M) @ X.T


def feature_force(A, X, M):
    """``Σ_h (A_h X M_hᵀ + A_hᵀ X M_h)``, shape (N, d)."""
    return np.sum(A @ (X @ M.transpose(0, 2, 1)) + A.transpose(0, 2, 1) @ (X @ M), axis=0)


def momentum_force(prob, X, P, A):
    """``Ṗ = −∂H/∂X = Σ_h f(A_h, X) − kX``, shape (N, d) (0 on the constant column)."""
    return part_one.pin(prob, feature_force(A, X, prob.M) - prob.confinement * X)


def feature_velocity(prob, X, P, A):
    """``Ẋ = P/m``."""
    return P / prob.mass


def free_energy(A, S, beta, log_a=None):
    """``Σ_h F(A_h; X, M_h) = Σ_h Σ_i [−Σ_j A S + (1/β) Σ_j A log A]``."""
    log_a = np.log(A) if log_a is None else log_a
    return float(-np.sum(A * S) + np.sum(A * log_a) / beta)


def hamiltonian(prob, X, P, A, log_a=None):
    """``H = ‖P‖²/(2m) + Σ_h F(A_h; X, M_h) + (k/2)‖X‖²``."""
    return (float(np.sum(P * P)) / (2.0 * prob.mass) + part_one.confinement_energy(prob, X)
            + free_energy(A, scores(X, prob.M), prob.beta, log_a))


def dissipation_rate(prob, A, log_a, S):
    """``D = γ Σ_h Σ_i Var_{A_h,i}(C_h,i)``, ``C = −S + (1 + log A)/β``."""
    C = -S + (1.0 + log_a) / prob.beta
    C = C - np.sum(A * C, axis=-1, keepdims=True)
    return float(prob.gamma * np.sum(A * C * C))


def relax(prob, Z, S, h):
    """The exact logit step of every head for frozen scores over ``h``:
    ``Z ← e^{−λh} Z + (1 − e^{−λh}) βS``, rows shifted to maximum 0."""
    E = math.exp(-prob.relaxation_rate * h)
    Z = E * Z - math.expm1(-prob.relaxation_rate * h) * prob.beta * S
    return Z - Z.max(axis=-1, keepdims=True)


class MultiHeadStrang(Stepper):
    """Strang splitting: every head relaxes exactly over ``h/2`` at frozen features,
    velocity Verlet moves ``(X, P)`` over ``h`` at frozen attention, the heads relax over
    ``h/2`` again. While features are frozen the free energy falls by exactly the energy
    the relaxation dissipates, so ``dissipated`` adds that fall (``∫D`` of each half step,
    exact); the balance's residual is Verlet's energy error, ``O(h²)``.

    The tracking bound ``B`` (H, N) bounds the scheme's own log-odds ``W = Z − βS`` per
    head and row: a relaxation multiplies ``W`` by ``e^{−λh/2}``, the move of the features
    changes it by ``−β(S₁ − S₀)``, so ``B ← e^{−λh/2} B`` and ``B ← B + β osc(S₁ − S₀)``.
    """

    order = 2

    def perturbed(self, state, carry, spread):
        """Noisy logits (rule 8): the bound of every head and row grows by ``spread``."""
        return replace(state, B=state.B + spread), self.start(state)

    def _relax(self, X, Z, S, h):
        prob = self.problem
        before = free_energy(softmax(Z, axis=-1), S, prob.beta, log_softmax(Z, axis=-1))
        Z = relax(prob, Z, S, h)
        after = free_energy(softmax(Z, axis=-1), S, prob.beta, log_softmax(Z, axis=-1))
        return Z, before - after

    def step(self, state, carry, h):
        prob = self.problem
        decay = math.exp(-prob.relaxation_rate * h / 2)
        S0 = scores(state.X, prob.M)
        Z, spent = self._relax(state.X, state.Z, S0, h / 2)
        A = softmax(Z, axis=-1)
        P = state.P + 0.5 * h * momentum_force(prob, state.X, state.P, A)
        X = state.X + h * P / prob.mass
        P = P + 0.5 * h * momentum_force(prob, X, P, A)
        S = scores(X, prob.M)
        Z, spent2 = self._relax(X, Z, S, h / 2)
        B = decay * (decay * state.B + prob.beta * oscillation(S - S0))
        return replace(state, t=state.t + h, X=X, P=P, Z=Z, A=softmax(Z, axis=-1), S=S,
                       S_dot=None, B=B, dissipated=state.dissipated + spent + spent2), None


def build(values, given):
    """The problem and initial state of the canonical model on every head of one layer of
    the shipped MiniLM heads or a checkpoint's (``weights="minilm"`` or ``"checkpoint"``,
    ``heads="all"``)."""
    if values.get("weights", "seed") == "seed":
        raise ValueError("heads must be 'one' with weights='seed' (there is one head): "
                         "heads='all' needs a real layer, weights='minilm' or 'checkpoint'")
    if given:
        raise ValueError(f"heads='all' takes no {', '.join(given)}")
    layer = real_heads.chosen(values, "all")
    shown = real_heads.chosen(values).heads[0]
    X, M, W_V = layer.scaled()
    N, d = X.shape
    data = draw_initial_data(N, d, values["seed"])
    prob = MultiHeadProblem(M=M, W_V=W_V, beta=values["beta"], gamma=values["gamma"],
                            mass=values["mass"], confinement=values["confinement"],
                            tokens=layer.tokens, shown=shown, fixed=1)
    P = np.zeros((N, d))
    if values.get("init_momentum") == "random":
        P = part_one.pin(prob, float(np.sqrt(np.mean(X * X))) * data.P)
    S = scores(X, M)
    init = values.get("init_attention", "uniform")
    if init == "softmax":
        Z = prob.beta * S
    elif init == "uniform":
        Z = np.zeros_like(S)
    else:
        Z = np.broadcast_to(data.Z, S.shape).copy()
    Z = Z - Z.max(axis=-1, keepdims=True)
    return prob, State(t=0.0, X=X, P=P, Z=Z, A=softmax(Z, axis=-1), S=S,
                       B=oscillation(Z - prob.beta * S))


def energy(prob, state, log_a=None):
    """``H`` of a state (``log_a`` from its logits, recomputed per head)."""
    return hamiltonian(prob, state.X, state.P, state.A, log_softmax(state.Z, axis=-1))


def diagnostics(prob, state, energy0, names=None, arrays=True):
    """Every Part I diagnostic of a multi-head state (sums over heads), and the arrays of
    its frame: ``attention``, ``softmax``, ``target`` of the head ``shown``, ``kl_rows``
    summed over heads, ``heads`` every head's attention (H, N, N). ``names`` and
    ``arrays``: all are computed, those asked for kept
    (:func:`~dynamics.diagnostics.select`)."""
    st, beta = state, prob.beta
    S = scores(st.X, prob.M)
    log_a = log_softmax(st.Z, axis=-1)
    log_star = log_softmax(beta * S, axis=-1)
    kl_rows = np.maximum(np.sum(st.A * (log_a - log_star), axis=-1), 0.0)  # (H, N)
    F = free_energy(st.A, S, beta, log_a)
    kinetic = float(np.sum(st.P * st.P)) / (2.0 * prob.mass)
    E = kinetic + F + part_one.confinement_energy(prob, st.X)
    lse = np.log(np.sum(np.exp(beta * S - (beta * S).max(axis=-1, keepdims=True)), axis=-1)) \
        + (beta * S).max(axis=-1)
    kl = float(kl_rows.sum())
    diag = {
        "t": st.t, "free_energy": F, "potential": float(-np.sum(lse) / beta),
        "hamiltonian": E, "kinetic_energy": kinetic,
        "dissipation_rate": dissipation_rate(prob, st.A, log_a, S),
        "dissipated": st.dissipated, "work": st.work, "noise_work": st.noise_work,
        "kl": kl, "kl_target": kl,
        "kl_bound": float(np.sum(st.B**2) / 8.0),
        "energy_residual": E - energy0 - st.work + st.dissipated,
        "entropy_mean": float(np.mean(-np.sum(st.A * log_a, axis=-1))),
        "min_attention": float(st.A.min()),
        "row_sum_error": float(np.max(np.abs(st.A.sum(axis=-1) - 1.0))),
        "feature_norm": float(np.sqrt(np.sum(st.X * st.X))),
        "momentum_energy": kinetic,
    }
    softmax_shown = np.exp(log_star[prob.shown])
    frame_arrays = {"attention": st.A[prob.shown].copy(), "softmax": softmax_shown,
              "target": softmax_shown, "kl_rows": kl_rows.sum(axis=0), "heads": st.A.copy()}
    return select(diag, frame_arrays, names, arrays)


def retrack(prob, state, values):
    """After a setting change: the new problem, and the bound still a bound (a change of
    β moves ``W = Z − βS`` by ``−Δβ S``: ``B`` grows by ``|Δβ| osc(S)``)."""
    new = prob.with_values(values)
    B = state.B + abs(new.beta - prob.beta) * oscillation(scores(state.X, prob.M))
    return new, replace(state, B=B)


def reference(prob, state):
    """``(rhs, y0, unpack)`` for ``solve_ivp``, ``y = [X, P, Z_1 … Z_H, ∫D]``: the readable
    field, ``dZ_h/dt = γ S_h − λ Z_h``, ``D`` from the costs' row variances."""
    N, d = state.X.shape
    H = prob.M.shape[0]
    nx, nz = N * d, H * N * N

    def rhs(_t, y):
        X = y[:nx].reshape(N, d)
        P = y[nx:2 * nx].reshape(N, d)
        Z = y[2 * nx:2 * nx + nz].reshape(H, N, N)
        A, log_a, S = softmax(Z, axis=-1), log_softmax(Z, axis=-1), scores(X, prob.M)
        dZ = prob.gamma * S - prob.relaxation_rate * Z
        return np.concatenate([feature_velocity(prob, X, P, A).ravel(),
                               momentum_force(prob, X, P, A).ravel(), dZ.ravel(),
                               [dissipation_rate(prob, A, log_a, S)]])

    def unpack(y):
        return {"X": y[:nx].reshape(N, d), "P": y[nx:2 * nx].reshape(N, d),
                "Z": y[2 * nx:2 * nx + nz].reshape(H, N, N), "dissipated": y[-1]}

    y0 = np.concatenate([state.X.ravel(), state.P.ravel(), state.Z.ravel(), [0.0]])
    return rhs, y0, unpack


# -- one model, one head or all: the canonical spec calls these -----------------------
def either(single, multi):
    """A spec function ``(problem, ...)`` that runs ``multi`` on a multi-head problem and
    ``single`` otherwise."""
    def call(problem, *args, **kwargs):
        return (multi if isinstance(problem, MultiHeadProblem) else single)(problem, *args,
                                                                             **kwargs)
    call.__name__, call.__doc__ = single.__name__, single.__doc__
    return call


def either_stepper(single):
    """The stepper of a spec: :class:`MultiHeadStrang` on a multi-head problem, ``single``
    otherwise (``order`` is ``single``'s: the order test runs one head)."""
    def make(problem):
        return (MultiHeadStrang if isinstance(problem, MultiHeadProblem) else single)(problem)
    make.order, make.__name__ = single.order, single.__name__
    return make


def either_build(single):
    """The build of a spec: :func:`build` when ``heads="all"``, ``single`` otherwise."""
    def call(values, given):
        return (build if values.get("heads", "one") == "all" else single)(values, given)
    return call
