"""The inertial lab's data from a weights file: which arrays it takes, the largest data
it runs, and the checks that turn a file's ``X`` (and ``A``, ``V``, ``P``) into the
:class:`~dynamics.inertial.lab_curves.LabData` of a run (:func:`file_data`).

A matrix the file lacks comes from its diagonal setting, as in the generated data of
:func:`dynamics.inertial.experiments.lab_data`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..settings import Settings
from ..weights_file import WEIGHT_ARRAYS
from .clouds import second_moment
from .damping import Damping
from .lab_curves import DIAGONALS, THRESHOLD, LabData
from .matrices import model_matrices, parse_diagonal, require_symmetric

#: The arrays a lab run takes from a weights file (the names of
#: :data:`dynamics.weights_file.WEIGHT_ARRAYS`: ``X``, ``P``, ``A``, ``V``); ``features`` is needed.
LAB_ARRAYS = ("features", "momenta", "kernel", "value")
#: The largest second moment of a file's tokens the lab starts from (the runs stop as
#: blown up at ``λ_max(S)`` = :data:`THRESHOLD`, 1e5 times more).
SCALE_LIMIT = 1e3
#: The largest data from a file the lab runs: a run takes 0.6 s at N = 64, d = 16, and
#: took 12 s at N = 256 (most of it the three streamed softmax models, whose steps cost
#: N²d), too long for a page that waits for it.
LAB_MAX_TOKENS, LAB_MAX_DIM = 64, 16


def file_shape(arrays: Mapping) -> tuple[int, int]:
    """``(N, d)`` of a weights file's features, checked before any setting takes them.

    Raises
    ------
    ValueError
        Arrays of the main tab's models (``M``, ``W_V``), no features ``X``, ``X`` not a
        matrix with ``N ≥ 2``, ``d ≥ 1``, or more than :data:`LAB_MAX_TOKENS` tokens or
        :data:`LAB_MAX_DIM` dimensions.
    """
    names = {v: k for k, v in WEIGHT_ARRAYS.items()}  # the file's names of the arrays
    other = sorted(names.get(k, k) for k in set(arrays) - set(LAB_ARRAYS))
    if other:
        raise ValueError(f"the lab runs the Part II arrays X, P, A, V; {' and '.join(other)} "
                         f"{'belongs' if len(other) == 1 else 'belong'} to the Part I "
                         "models of the main tab (upload the file there)")
    if "features" not in arrays:
        raise ValueError("the lab needs the features X, shape (N, d)")
    shape = np.shape(arrays["features"])
    if len(shape) != 2 or shape[0] < 2 or shape[1] < 1:
        raise ValueError(f"X must be a matrix (N, d) with N ≥ 2, d ≥ 1, got shape {shape}")
    n, d = shape
    if n > LAB_MAX_TOKENS or d > LAB_MAX_DIM:
        raise ValueError(f"the lab runs at most N = {LAB_MAX_TOKENS} tokens of dimension "
                         f"d = {LAB_MAX_DIM}, got N = {n}, d = {d} (run larger data with "
                         "python -m dynamics run --weights FILE)")
    return n, d


def file_data(settings: Settings, arrays: Mapping) -> LabData:
    """The data of a lab run from a weights file.

    Parameters
    ----------
    settings : Settings
        ``n_tokens`` and ``dim`` equal to the shape of ``features``; the damping; ``A``
        and ``V`` as :func:`lab_data` makes them where the file has none.
    arrays : mapping
        Of :data:`LAB_ARRAYS`: ``features`` ``X`` (N, d), needed; ``kernel`` ``A`` (d, d)
        symmetric positive definite; ``value`` ``V`` (d, d) symmetric; ``momenta`` (N, d)
        (read by :func:`softmax_curves` only).

    Returns
    -------
    LabData
        With ``a = v = s0 = None`` (``A``, ``V``, ``S(0)`` need not commute).

    Raises
    ------
    ValueError
        Another array (``M``, ``W_V`` are the main tab's), an array of the wrong shape or
        not finite, more than :data:`LAB_MAX_TOKENS` tokens or :data:`LAB_MAX_DIM`
        dimensions, ``A`` or ``V`` not symmetric, ``A`` not positive definite or of
        condition number above 1e12, or ``S(0) = XᵀX/N`` singular (the clouds compared
        share it) or with ``λ_max`` above :data:`SCALE_LIMIT`.
    """
    n, d = file_shape(arrays)
    if (settings.n_tokens, settings.dim) != (n, d):
        raise ValueError(f"the settings have N = {settings.n_tokens}, d = {settings.dim}; "
                         f"the features have shape {(n, d)}")
    X = np.asarray(arrays["features"], dtype=float)
    generated = None
    if not {"kernel", "value"} <= set(arrays):  # the diagonal of a matrix the file lacks
        a, v = (parse_diagonal("1" if key in arrays else getattr(settings, diagonal), d,
                               f"{DIAGONALS[diagonal]} (the file has no {name})")
                for diagonal, key, name in (("kernel_diag", "kernel", "A"),
                                            ("value_diag", "value", "V")))
        generated = model_matrices(a, v, d, settings.matrix_draw,
                                   np.random.default_rng(settings.seed))
    out = {}
    for key, name, shape in (("features", "X", (n, d)), ("momenta", "P", (n, d)),
                             ("kernel", "A", (d, d)), ("value", "V", (d, d))):
        if key not in arrays:
            continue
        M = np.asarray(arrays[key], dtype=float)
        if M.shape != shape:
            raise ValueError(f"{name} must have shape {shape} (X is {n}×{d}), got {M.shape}")
        if not np.all(np.isfinite(M)):
            raise ValueError(f"{name} has entries that are not finite")
        out[name] = M
    A = out.get("A", generated[0] if generated else None)
    V = out.get("V", generated[1] if generated else None)
    require_symmetric(A, "kernel A", "the lab (its moment systems)")
    require_symmetric(V, "value matrix V", "the lab (its moment systems)")
    eigenvalues = np.linalg.eigvalsh(A)
    smallest, largest_a = float(eigenvalues[0]), float(eigenvalues[-1])
    if smallest <= 0:
        raise ValueError(f"the lab needs a positive definite kernel A; A has the "
                         f"eigenvalue {smallest:.3g}")
    if smallest < 1e-12 * largest_a:
        raise ValueError(f"the lab needs a kernel A of condition number below 1e12; A's "
                         f"eigenvalues range from {smallest:.3g} to {largest_a:.3g}")
    S0 = second_moment(X)
    moments = np.linalg.eigvalsh(S0)
    if moments[0] <= 1e-12 * max(1.0, float(np.abs(S0).max())):
        raise ValueError("the lab needs features X that span R^d (S(0) = XᵀX/N positive "
                         "definite: the clouds it compares share S(0))")
    largest = float(moments[-1])
    if largest > SCALE_LIMIT:
        raise ValueError(f"λ_max(S(0)) = {largest:.3g} is above {SCALE_LIMIT:g}: the lab "
                         f"counts λ_max(S) = {THRESHOLD:g} as blown up; rescale X")
    return LabData(None, None, A, V, X, S0, None, Damping.from_settings(settings))
