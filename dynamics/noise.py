"""Stochastic logits (Theory page: "Stochastic logits"): the noise of
``dZ = (γŜ − λZ) dt + σ dW`` and where its increments come from.

The logit flow is linear, so the noise enters additively: over a step of ``h`` its
contribution is the Gaussian ``σ √((1 − e^{−2λh})/(2λ)) ξ``, ``ξ`` standard normal per
entry, independent of the deterministic part. Adding it to the exact logit step
(:func:`~dynamics.logits.logit_step`) gives the exact step in law for frozen scores
(and the scheme's order otherwise); the engine adds it after each step of a scheme
(:meth:`dynamics.Simulation.advance`), so every model that relaxes attention gets the
same noise.

The increments are counter-based: those of step ``n`` of a run are a pure function of
``(seed, replica, n)`` (a Philox generator keyed by the seed and the replica, its counter
set to ``n``). The same seed therefore gives the same path bit for bit whatever the
chunking of the steps, and a run continued after a setting change draws what it would
have drawn. Replicas ``r = 0, 1, …`` of an ensemble use the streams
``SeedSequence(seed, spawn_key=(NOISE_STREAM, r))``, the children ``spawn`` gives of one
root ``SeedSequence(seed, spawn_key=(NOISE_STREAM,))``; the initial data
(:func:`~dynamics.initial.draw_initial_data`, ``SeedSequence(seed)``) are the same for
every replica.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .logits import centre_rows

#: Spawn key of the noise streams (the initial data use the seed's root stream).
NOISE_STREAM = 19


def noise_scale(sigma: float, lam: float, h: float) -> float:
    """``σ √((1 − e^{−2λh})/(2λ))``: the standard deviation the noise adds to a logit over
    a step of ``h`` (``σ√h`` as ``λh → 0``)."""
    x = 2.0 * lam * h
    frac = h * (1.0 - x / 2.0 + x * x / 6.0) if x < 1e-6 else -math.expm1(-x) / (2.0 * lam)
    return sigma * math.sqrt(frac)


def stationary_variance(sigma: float, lam: float) -> float:
    """``s² = σ²/(2λ)``: the stationary variance of a logit about its target."""
    return sigma * sigma / (2.0 * lam)


def noise_seed_sequence(seed: int, replica: int = 0) -> np.random.SeedSequence:
    """The seed sequence of the noise of replica ``replica`` of a run with ``seed``."""
    return np.random.SeedSequence(seed, spawn_key=(NOISE_STREAM, replica))


@dataclass(frozen=True)
class NoiseClock:
    """Where a run's noise stands: its Philox key and the number of steps taken (the
    counter of the next increment). Immutable: :meth:`tick` returns the next one.

    Attributes
    ----------
    key : tuple of int
        The two 64-bit words of the Philox key.
    step : int
        Steps taken since the run started (restarts set it to 0; setting changes that
        continue the run keep it).
    """

    key: tuple
    step: int = 0

    @classmethod
    def start(cls, seed: int, replica: int = 0) -> NoiseClock:
        """The clock of a run started with ``seed`` (replica ``replica`` of an ensemble)."""
        words = noise_seed_sequence(seed, replica).generate_state(2, np.uint64)
        return cls(key=tuple(int(w) for w in words))

    def increment(self, shape) -> np.ndarray:
        """The standard normal ``ξ`` of step :attr:`step`, shape ``shape``: a pure
        function of the key and the step."""
        bits = np.random.Philox(key=np.array(self.key, dtype=np.uint64),
                                counter=np.array([0, 0, 0, self.step], dtype=np.uint64))
        return np.random.Generator(bits).standard_normal(shape)

    def tick(self) -> NoiseClock:
        """The clock after one step."""
        return NoiseClock(self.key, self.step + 1)


def perturb_logits(Z: np.ndarray, scale: float, xi: np.ndarray) -> np.ndarray:
    """``Z + scale·ξ`` with row maxima 0, a new array (``Z`` is never written).

    Parameters
    ----------
    Z : ndarray, shape (N, N)
        Logits after the deterministic step.
    scale : float
        :func:`noise_scale` of the step.
    xi : ndarray, shape (N, N)
        Standard normal increments (both of shape (H, N, N) with several heads).
    """
    Z1 = np.multiply(xi, scale)
    Z1 += Z
    return centre_rows(Z1, out=Z1)


def softmax_with_log(Z):
    """``(rowsoftmax(Z), log rowsoftmax(Z))`` of logits with row maxima 0, from one
    exponential (no ``log A``: nothing underflows to ``log 0``), shapes (N, N) or a stack
    (H, N, N) (one matrix per head; rows are the last axis)."""
    E = np.exp(Z)
    total = np.add.reduce(E, -1)
    E *= np.divide(1.0, total)[..., None]
    return E, Z - np.log(total)[..., None]


def small_noise_kl(softmax: np.ndarray, s2: float) -> float:
    """The small-noise stationary mean of ``Σ_i KL(A_i ‖ A*_i)``:
    ``½ s² Σ_i (1 − Σ_j A*_ij²)`` (exact to first order in ``s²``).

    Parameters
    ----------
    softmax : ndarray, shape (..., N, N)
        ``A*``; leading axes (replicas) are averaged.
    s2 : float
        :func:`stationary_variance`.
    """
    A = np.asarray(softmax)
    per = 0.5 * s2 * np.sum(1.0 - np.sum(A * A, axis=-1), axis=-1)
    return float(np.mean(per))


__all__ = ["NOISE_STREAM", "NoiseClock", "noise_scale", "noise_seed_sequence",
           "perturb_logits", "small_noise_kl", "softmax_with_log", "stationary_variance"]
