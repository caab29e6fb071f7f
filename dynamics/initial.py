"""Initial data of Part I, drawn from the seed independently of the model.

Two models run with one seed start from the same features, momenta, ``M`` and
``W_V`` (the comparison mode relies on it): every array is drawn, in a fixed
order, whatever the model.

Scales (chosen so the default run of every model is bounded and readable over
``t = 10``, see the Theory page on confinement):

* ``X_in`` has i.i.d. ``N(0, 1)`` entries, so ``‖x_i‖² ≈ d``;
* ``M = G / d`` with ``G`` standard Gaussian: scores have standard deviation ≈ 1,
  ``‖M‖₂ ≈ 2/√d``;
* ``W_V = G' / (4√d)``: spectral radius ≈ 1/4, so the value flows grow roughly
  like ``e^{t/4}`` (cotangent lift and Transformer flow; ≤ 15× over t = 10
  for seeds 0-7 at the defaults);
* random momenta are ``N(0, 1)``; random initial logits are ``N(0, 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InitialData:
    """Arrays drawn from one seed (shapes as on the Theory page)."""

    X: np.ndarray  # (N, d) input features X_in
    P: np.ndarray  # (N, d) random momenta
    M: np.ndarray  # (d, d) query-key interaction
    W_V: np.ndarray  # (d, d) value map
    Y: np.ndarray  # (N, d) direction of oscillation / drift / switch / converging
    Q: np.ndarray  # (d, d) orthonormal basis of the rotation planes
    Z: np.ndarray  # (N, N) random initial logits


def draw_initial_data(n_tokens: int, dim: int, seed: int) -> InitialData:
    """Draw every random array of a Part I simulation from ``seed``."""
    rng = np.random.default_rng(seed)
    N, d = n_tokens, dim
    X = rng.standard_normal((N, d))
    P = rng.standard_normal((N, d))
    M = rng.standard_normal((d, d)) / d
    W_V = rng.standard_normal((d, d)) / (4.0 * np.sqrt(d))
    Y = rng.standard_normal((N, d))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Z = rng.standard_normal((N, N))
    return InitialData(X=X, P=P, M=M, W_V=W_V, Y=Y, Q=Q, Z=Z)
