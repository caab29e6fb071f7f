"""What a simulation reports at one instant."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

RUNNING = "running"
DIVERGED = "diverged"
FAILED = "failed"


@dataclass(frozen=True)
class Frame:
    """One recorded instant of a simulation.

    Attributes
    ----------
    t : float
        Time.
    features : ndarray, shape (N, d)
        Token features X (positions x_i in Part II).
    momenta : ndarray, shape (N, d)
        Momenta P (y_i in Part II); zeros for first-order models.
    attention : ndarray, shape (N, N) or None
        Current attention A (Part I) or the softmax kernel weights (Part II softmax).
    softmax : ndarray, shape (N, N) or None
        Softmax attention A* = rowsoftmax(βS) at the current features.
    target : ndarray, shape (N, N) or None
        Instantaneous attention target rowsoftmax(βŜ) (Theory page: coupled models).
    kl_rows : ndarray, shape (N,) or None
        KL(A_i ‖ A*_i) per row.
    diagnostics : dict of str to float
        Every scalar diagnostic of the model, ``t`` included.
    status : str
        ``"running"``, ``"diverged"`` or ``"failed"``.
    message : str
        Human-readable status, e.g. ``"diverged at t = 3.21: feature norm 1e6"``.
    tokens : tuple of str
        The tokens' words (a real sentence, ``weights="minilm"``); empty otherwise.
    heads : ndarray, shape (H, N, N) or None
        Every head's attention ``A_h`` when several heads run (``heads="all"``).
    """

    t: float
    features: np.ndarray
    momenta: np.ndarray
    attention: np.ndarray | None = None
    softmax: np.ndarray | None = None
    target: np.ndarray | None = None
    kl_rows: np.ndarray | None = None
    diagnostics: dict = field(default_factory=dict)
    status: str = RUNNING
    message: str = ""
    tokens: tuple = ()
    heads: np.ndarray | None = None
