"""Initial token clouds whitened to an exact second moment (Theory page, Part II).

Raw samples ``Z`` (Gaussian, Student-t, uniform in an ellipsoid) are mapped to
``X = Z L⁻ᵀ Cᵀ`` with ``L Lᵀ = (1/N) ZᵀZ`` and ``C Cᵀ = S₀``, so the uncentred
second moment ``(1/N) Σ_j x_j x_jᵀ`` equals ``S₀`` to rounding.
"""

from __future__ import annotations

import numpy as np

CLOUDS = ("gaussian", "student_t", "uniform_ellipsoid")


def second_moment(X: np.ndarray) -> np.ndarray:
    """Uncentred second moment ``S = (1/N) XᵀX`` (Theory page: "First-order linear attention").

    Parameters
    ----------
    X : ndarray, shape (N, d)

    Returns
    -------
    ndarray, shape (d, d)
    """
    S = X.T @ X / X.shape[0]
    return 0.5 * (S + S.T)


def raw_cloud(kind: str, n: int, d: int, rng: np.random.Generator, *,
              df: float = 3.0) -> np.ndarray:
    """Unwhitened samples, shape (n, d).

    ``"gaussian"``: standard normal; ``"student_t"``: multivariate t with ``df``
    degrees of freedom; ``"uniform_ellipsoid"``: uniform in an ellipsoid with random
    semi-axes in [0.5, 2].
    """
    if kind == "gaussian":
        return rng.standard_normal((n, d))
    if kind == "student_t":
        g = rng.standard_normal((n, d))
        return g / np.sqrt(rng.chisquare(df, size=(n, 1)) / df)
    if kind == "uniform_ellipsoid":
        g = rng.standard_normal((n, d))
        u = g / np.linalg.norm(g, axis=1, keepdims=True)
        radius = rng.random((n, 1)) ** (1.0 / d)
        return u * radius * rng.uniform(0.5, 2.0, size=d)
    raise ValueError(f"cloud must be one of {CLOUDS}, got {kind!r}")


def whiten(Z: np.ndarray, S0: np.ndarray) -> np.ndarray:
    """Map samples to a cloud with second moment exactly ``S0``.

    Parameters
    ----------
    Z : ndarray, shape (N, d)
        Samples whose second moment is non-singular (needs ``N ≥ d``).
    S0 : ndarray, shape (d, d)
        Target, symmetric positive definite.

    Returns
    -------
    X : ndarray, shape (N, d)
        ``(1/N) XᵀX = S0``.
    """
    n, d = Z.shape
    if n < d:
        raise ValueError(f"a cloud with second moment S(0) of full rank needs "
                         f"n_tokens >= dim, got n_tokens = {n} < dim = {d}")
    try:
        L = np.linalg.cholesky(second_moment(Z))
        C = np.linalg.cholesky(0.5 * (S0 + S0.T))
    except np.linalg.LinAlgError:
        raise ValueError("the cloud's or the target's second moment is singular") from None
    W = np.linalg.solve(L, Z.T).T  # Z L^{-T}
    return W @ C.T


def initial_cloud(kind: str, n: int, d: int, s0, rng: np.random.Generator) -> np.ndarray:
    """Initial tokens with ``S(0) = s0 I`` (scalar) or ``S(0) = s0`` (matrix).

    Parameters
    ----------
    kind : {"gaussian", "student_t", "uniform_ellipsoid"}
    n, d : int
        Tokens and dimension, ``n ≥ d``.
    s0 : float or ndarray, shape (d, d)
    rng : numpy.random.Generator

    Returns
    -------
    X0 : ndarray, shape (n, d)
    """
    S0 = s0 * np.eye(d) if np.ndim(s0) == 0 else np.asarray(s0, float)
    if n < d:
        raise ValueError(f"a cloud with second moment S(0) of full rank needs "
                         f"n_tokens >= dim, got n_tokens = {n} < dim = {d}")
    return whiten(raw_cloud(kind, n, d, rng), S0)
