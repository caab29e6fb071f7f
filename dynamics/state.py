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


#: User-given matrices of each part: Part I's score matrix ``M`` (``S = X M Xᵀ``) and value
#: map ``W_V``; Part II's kernel ``A`` (scores ``x_iᵀ A x_j``) and value ``V``.
MATRICES = {1: ("score_matrix", "value_matrix"), 2: ("kernel", "value")}


def check_initial_arrays(values, features=None, momenta=None, attention=None,
                         score_matrix=None, value_matrix=None, kernel=None,
                         value=None) -> dict:
    """Validate user-given arrays: shapes, finiteness, positive row-stochastic A(0), and
    matrices of the model's part.

    Parameters
    ----------
    values : dict
        Setting values (``n_tokens``, ``dim``, ``model``, ``weights``).
    features, momenta : array_like, shape (N, d), optional
    attention : array_like, shape (N, N), optional
    score_matrix, value_matrix : array_like, shape (d, d), optional
        ``M`` and ``W_V`` of a Part I model.
    kernel, value : array_like, shape (d, d), optional
        ``A`` and ``V`` of a Part II model (their own conditions, symmetry and
        definiteness, are checked by the model's build).

    Returns
    -------
    dict
        The given arrays as float arrays, keyed by their names.

    Raises
    ------
    ValueError
        Naming what is wrong.
    """
    N, d = values["n_tokens"], values["dim"]
    from .models import registry  # (the registry does not import this module)

    part = registry.get(values["model"]).part if "model" in values else None
    matrices = {"score_matrix": score_matrix, "value_matrix": value_matrix,
                "kernel": kernel, "value": value}
    named = [k for k, v in {"features": features, "momenta": momenta,
                            "attention": attention, **matrices}.items() if v is not None]
    if named and values.get("weights", "seed") != "seed":
        raise ValueError(f"weights={values['weights']!r} brings its own features and "
                         f"matrices: give no {', '.join(named)} (or weights='seed')")
    if part is not None:
        stray = [k for k, v in matrices.items() if v is not None and k not in MATRICES[part]]
        if stray:
            raise ValueError(f"model {values['model']!r} (Part {'I' * part}) takes "
                             f"{' and '.join(MATRICES[part])}, not {', '.join(stray)}")
    given = {}
    for name, value, shape in (("features", features, (N, d)), ("momenta", momenta, (N, d)),
                               ("attention", attention, (N, N)),
                               *((k, v, (d, d)) for k, v in matrices.items())):
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
