"""Your own initial arrays and matrices (``Simulation(features=..., score_matrix=...)``):
their checks, and the run they start (:class:`~dynamics.simulation.Simulation`)."""

from __future__ import annotations

import numpy as np

from .models import registry
from .models.part_one import UnusedArrays

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


def build_with(spec, values: dict, arrays: dict, first: bool):
    """``(problem, state)`` of a run of ``spec`` (a
    :class:`~dynamics.models.registry.ModelSpec`) on the setting ``values`` and the
    user-given ``arrays`` (keyword arguments of :func:`check_initial_arrays`).

    The arrays serve every run whose shapes they fit (the others start from the seed);
    arrays a later model has no use for (momenta of a first-order flow) are left out of
    its run and serve the models that use them; the ``first`` run refuses them
    (:class:`~dynamics.models.part_one.UnusedArrays`, a ``ValueError``).
    """
    try:
        given = check_initial_arrays(values, **arrays)
    except ValueError:
        given = {}
    try:
        return spec.build(values, given)
    except UnusedArrays as unused:
        if first:
            raise
        return spec.build(values, {k: v for k, v in given.items() if k not in unused.names})


__all__ = ["MATRICES", "build_with", "check_initial_arrays"]
