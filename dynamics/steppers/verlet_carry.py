"""What a step of :class:`~.etd_verlet.EtdVerlet` keeps: the scalars of its step size
(:class:`Constants`), the carry the next step reuses (:class:`VerletCarry`), and the steps
whose tracking bound waits for :meth:`~.tracked_verlet.TrackedEtdVerlet.finish`
(:class:`Pending`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..state import State


@dataclass(frozen=True)
class Constants:
    """Scalars of a step of size ``h`` with one problem."""

    h: float
    beta: float
    lam: float
    logit: tuple  # logit_coefficients(beta, lam, h)
    lag: float  # −β/(λh)
    decay: float  # e^{−λh}
    w0: float  # β × the exponential trapezoid weights
    w1: float
    MMt: np.ndarray  # [M, Mᵀ], shape (d, 2d)
    #: β × the weights of :func:`~dynamics.logits.exp_quadratic` (stiff steps), or None
    wq: tuple | None = None
    #: :func:`~dynamics.logits.hermite_logit_weights` (value matching's cubic steps), or None
    hermite: tuple | None = None


@dataclass(frozen=True)
class Pending:
    """Steps whose ``dS/dt`` and tracking bound are computed together at the next
    :meth:`~.tracked_verlet.TrackedEtdVerlet.finish`: the state they started from, its
    carry, and per step the new state and its ``X M``."""

    constants: Constants
    base: State
    base_carry: object
    states: tuple
    XMs: tuple
    #: per step, the row oscillation of the noise added to its logits (or None)
    spreads: tuple = ()


@dataclass(frozen=True)
class VerletCarry:
    """What the next step reuses: the force at the state, value matching's ``G`` and
    ``Ŝ = G Xᵀ``, and the dissipation rate ``D``."""

    force: np.ndarray | None = None
    G: np.ndarray | None = None
    D: float | None = None
    S_hat: np.ndarray | None = None
    #: ``osc(dS/dt)`` at the state, shape (N,) (tracked steps)
    osc_S_dot: np.ndarray | None = None
    #: ``(h, osc(dS/dt))`` one step of ``h`` before the state (tracked stiff steps)
    osc_before: tuple | None = None
    #: steps whose ``dS/dt`` and bound wait for :meth:`~.tracked_verlet.TrackedEtdVerlet.finish`
    pending: Pending | None = None
    #: ``osc(W₀)`` at the start of the step before when it was graded, else 0
    graded_osc: float = 0.0
    #: the state is no distant start (:func:`~.grading.fresh`): its logits were kicked
    #: by noise (rule 8; graded, every kick above ``GRADED_OSC`` cost a step of 32
    #: sub-steps or more), the run continues after a setting change (rule 9), or the step
    #: before was value matching's below the stiff branch (its carry keeps no ``D``)
    continued: bool = False
    #: ``Σ A log A`` at the state (value matching's steps below the stiff branch), or None
    neg_entropy: float | None = None
