"""The state of a run: an immutable snapshot that steppers return and never modify."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class State:
    """A run's state at time ``t`` (every array is read, never written, once in a state).

    Attributes
    ----------
    t : float
    X : ndarray, shape (N, d)
        Features (token positions ``x_i``).
    P : ndarray, shape (N, d)
        Momenta (``y_i`` in Part II); zeros for first-order models.
    Z : ndarray, shape (N, N) or None
        Attention logits with row maxima 0 (Part I), None in Part II.
    A : ndarray, shape (N, N) or None
        ``rowsoftmax(Z)``.
    S : ndarray, shape (N, N) or None
        Scores ``X M Xᵀ`` when the step computed them (None: compute on use).
    S_dot : ndarray, shape (N, N) or None
        ``dS/dt`` where the tracking bound needs it (attention, canonical).
    B : ndarray, shape (N,) or None
        The tracking bound of the Theory page's "tracking" section, per row.
    dissipated : float
        ``∫₀ᵗ D ds``.
    work : float
        Work done on the system: by a prescribed path, by setting changes, and by the
        noise on the logits.
    noise_work : float
        The noise's share of ``work``: the sum over steps of the energy jump its
        increment made (Theory page: stochastic logits); 0 without noise.
    """

    t: float
    X: np.ndarray
    P: np.ndarray
    Z: np.ndarray | None = None
    A: np.ndarray | None = None
    S: np.ndarray | None = None
    S_dot: np.ndarray | None = None
    B: np.ndarray | None = None
    dissipated: float = 0.0
    work: float = 0.0
    noise_work: float = 0.0

    def copy(self) -> State:
        """A state with copies of every array (to keep past further steps)."""
        arrays = {k: (None if v is None else v.copy()) for k, v in self.__dict__.items()
                  if isinstance(v, np.ndarray)}
        return replace(self, **arrays)
