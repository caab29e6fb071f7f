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


def check_initial_arrays(values, features=None, momenta=None, attention=None) -> dict:
    """Validate user-given initial arrays: shapes, finiteness, positive row-stochastic A(0).

    Returns the given arrays as float arrays, keyed ``features``, ``momenta``,
    ``attention``; raises ``ValueError`` naming what is wrong.
    """
    N, d = values["n_tokens"], values["dim"]
    given = {}
    for name, value, shape in (("features", features, (N, d)), ("momenta", momenta, (N, d)),
                               ("attention", attention, (N, N))):
        if value is None:
            continue
        try:
            arr = np.array(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a numeric array of shape {shape}") from None
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape} (n_tokens={N}, dim={d}), "
                             f"got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite")
        given[name] = arr
    A = given.get("attention")
    if A is not None:
        if np.any(A <= 0):
            raise ValueError("attention A(0) must be strictly positive; its smallest entry "
                             f"is {A.min():g}")
        err = np.max(np.abs(A.sum(axis=1) - 1.0))
        if err > 1e-9:
            raise ValueError(f"attention A(0) rows must sum to 1; largest error {err:.3g}")
    return given
