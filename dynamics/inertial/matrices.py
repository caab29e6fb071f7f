"""Kernel and value matrices of Part II (Theory page, Part II).

``A`` (kernel, ``A = Aᵀ ≻ 0``) and ``V`` (value, ``V = Vᵀ``) are given by their
eigenvalues, either diagonal as written or rotated by one random orthogonal ``Q``:
``A = Q diag(a) Qᵀ``, ``V = Q diag(v) Qᵀ``. They always commute. (The models act with
``A x`` and ``V x``; the first-order flows accept any matrices, the Hamiltonian ones check
what they need: :func:`require_symmetric`, :func:`value_kernel_ratio`.)
"""

from __future__ import annotations

import numpy as np


def parse_diagonal(text: str, d: int, name: str = "diagonal") -> np.ndarray:
    """Parse one float (broadcast) or ``d`` comma-separated floats.

    Parameters
    ----------
    text : str
        ``"1"`` or ``"1, 2, 0.5, 3"``.
    d : int
        Feature dimension.
    name : str
        Name used in error messages.

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    ValueError
        On a parse error, a wrong count or a non-finite value.
    """
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = np.array([float(p) for p in parts], dtype=float)
    except ValueError:
        raise ValueError(f"{name} must be one number or {d} comma-separated numbers, "
                         f"got {text!r}") from None
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got {text!r}")
    if values.size == 1:
        return np.full(d, values[0])
    if values.size != d:
        raise ValueError(f"{name} needs 1 or d = {d} values, got {values.size} in {text!r}")
    return values


def random_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal matrix ``Q`` (QR of a Gaussian, signs fixed), shape (d, d)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def model_matrices(kernel_diag, value_diag, d: int, draw: str = "diagonal",
                   rng: np.random.Generator | None = None):
    """Build the kernel ``A`` and value ``V`` (Theory page: "First-order linear attention").

    Parameters
    ----------
    kernel_diag, value_diag : str or array_like, shape (d,)
        Eigenvalues ``a_k`` (all > 0) and ``v_k``.
    d : int
        Feature dimension.
    draw : {"diagonal", "random"}
        ``"random"`` conjugates both by one random orthogonal ``Q`` drawn from ``rng``.
    rng : numpy.random.Generator, optional
        Needed for ``draw="random"``.

    Returns
    -------
    A, V : ndarray, shape (d, d)
        Symmetric, commuting.

    Raises
    ------
    ValueError
        Bad strings, or ``A`` not positive definite.
    """
    a = (parse_diagonal(kernel_diag, d, "kernel_diag") if isinstance(kernel_diag, str)
         else np.broadcast_to(np.asarray(kernel_diag, float), (d,)).copy())
    v = (parse_diagonal(value_diag, d, "value_diag") if isinstance(value_diag, str)
         else np.broadcast_to(np.asarray(value_diag, float), (d,)).copy())
    if np.any(a <= 0):
        raise ValueError(f"kernel A must be positive definite: kernel_diag has "
                         f"non-positive entries {a[a <= 0].tolist()}")
    if draw == "diagonal":
        return np.diag(a), np.diag(v)
    if draw != "random":
        raise ValueError(f"matrix_draw must be 'diagonal' or 'random', got {draw!r}")
    if rng is None:
        raise ValueError("matrix_draw='random' needs a random generator")
    q = random_orthogonal(d, rng)
    return _sym((q * a) @ q.T), _sym((q * v) @ q.T)


def is_symmetric(M: np.ndarray, rtol: float = 1e-12) -> bool:
    """``M = Mᵀ`` up to ``rtol`` times its largest entry (at least 1)."""
    M = np.asarray(M, float)
    scale = max(1.0, float(np.max(np.abs(M)))) if M.size else 1.0
    return bool(np.max(np.abs(M - M.T), initial=0.0) <= rtol * scale)


def require_symmetric(M: np.ndarray, what: str, who: str) -> None:
    """``ValueError`` naming ``who`` (the model) and ``what`` (the matrix) unless
    ``M = Mᵀ`` (:func:`is_symmetric`)."""
    if not is_symmetric(M):
        gap = float(np.max(np.abs(M - M.T)))
        raise ValueError(f"{who} needs a symmetric {what}; got one with largest asymmetry "
                         f"max_ij |m_ij − m_ji| = {gap:.3g} (give a symmetric matrix)")


def value_kernel_ratio(A: np.ndarray, V: np.ndarray, who: str = "softmax_inertial",
                       hint: str = "give a value matrix V with V A⁻¹ positive definite"
                       ) -> np.ndarray:
    """``B = V A⁻¹``, validated symmetric positive definite (inertial softmax attention).

    ``V`` itself need not be symmetric (``V = B A``).

    Parameters
    ----------
    A, V : ndarray, shape (d, d)
    who : str
        The model named in messages.
    hint : str
        What to change, ending the message when ``B`` is not positive definite.

    Returns
    -------
    B : ndarray, shape (d, d)
        Exactly symmetric.

    Raises
    ------
    ValueError
        If ``A`` is not symmetric, or ``B`` is not symmetric or not positive definite.
    """
    require_symmetric(A, "kernel A", who)
    B = np.linalg.solve(A.T, V.T).T
    scale = max(1.0, float(np.max(np.abs(B))))
    if np.max(np.abs(B - B.T)) > 1e-10 * scale:
        raise ValueError(f"{who} needs B = V A⁻¹ symmetric (it is the metric of its "
                         "kinetic energy); with a symmetric V, A and V must commute")
    B = _sym(B)
    lam = np.linalg.eigvalsh(B)
    if lam[0] <= 0:
        raise ValueError(f"{who} needs B = V A⁻¹ positive definite (its kinetic energy "
                         f"½ Σ y_iᵀ B y_i / z_i must be positive): {hint} (B has the "
                         f"eigenvalue {lam[0]:.3g})")
    return B


def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + M.T)
