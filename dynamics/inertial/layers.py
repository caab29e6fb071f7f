"""Attention layers as steps of the flows, and effective depth (Theory page, Part II:
"Attention layers").

A scheme of step ``h`` turns a flow into layers; ``L`` layers have effective depth
``T = L h``. Schemes:

* ``"residual"`` (first order): ``X_{l+1} = X_l + h v(X_l)``;
* ``"euler"``: ``X_{l+1} = X_l + h F(X_l, Y_l)``, ``Y_{l+1} = Y_l + h (−α Y_l + G(X_l, Y_l))``;
* ``"kick_damp_drift"``: ``Y_{l+1} = σ (Y_l + h G(X_l, Y_l))`` with ``σ = e^{−∫α}`` over
  the step, then ``X_{l+1} = X_l + h F(X_l, Y_{l+1})``.

``F = ∂H/∂y`` is the velocity and ``G = −∂H/∂x`` the conservative force.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .accelerated import accelerated_force, accelerated_velocity, matrix_field
from .blowup import integrate_until_blowup
from .clouds import second_moment
from .damping import NO_DAMPING, Damping
from .linear import linear_velocity, moment_field

SCHEMES = ("residual", "euler", "kick_damp_drift")


def residual_layer(X, velocity: Callable, h: float):
    """``X + h v(X)``, shape (N, d)."""
    return X + h * velocity(X)


def euler_layer(X, Y, velocity: Callable, force: Callable, h: float, alpha: float):
    """Explicit Euler layer ``(X + h F, Y + h(−α Y + G))`` at ``(X, Y)``."""
    return X + h * velocity(X, Y), Y + h * (-alpha * Y + force(X, Y))


def kick_damp_drift_layer(X, Y, velocity: Callable, force: Callable, h: float,
                          sigma: float):
    """Kick–damp–drift layer: ``Y' = σ (Y + h G(X, Y))``, ``X' = X + h F(X, Y')``."""
    Y1 = sigma * (Y + h * force(X, Y))
    return X + h * velocity(X, Y1), Y1


@dataclass(frozen=True)
class LayerRun:
    """Per-layer output of :func:`run_layers`.

    Attributes
    ----------
    S : ndarray, shape (L + 1, d, d)
        Second moment after each layer (index 0 is the input).
    X, Y : ndarray, shape (N, d)
        Last finite layer output (``Y`` zeros for ``"residual"``).
    stopped : bool
        Whether the run stopped early (``λ_max(S)`` above ``stop`` or non-finite).
    """

    S: np.ndarray
    X: np.ndarray
    Y: np.ndarray
    stopped: bool

    @property
    def depth(self) -> np.ndarray:
        """Layer indices ``0 … L``, shape (L + 1,)."""
        return np.arange(len(self.S))


def run_layers(X0, Y0, velocity: Callable, force: Callable | None, h: float,
               n_layers: int, *, scheme: str = "kick_damp_drift",
               damping: Damping = NO_DAMPING, stop: float = 1e12) -> LayerRun:
    """Apply ``n_layers`` layers of a scheme (Theory page, Part II: "Attention layers").

    Parameters
    ----------
    X0, Y0 : ndarray, shape (N, d)
        Input tokens and momenta (``Y0`` ignored for ``"residual"``).
    velocity : callable
        ``v(X)`` for ``"residual"``, else ``F(X, Y)``.
    force : callable or None
        ``G(X, Y)``; unused for ``"residual"``.
    h : float
        Layer step.
    n_layers : int
    scheme : {"residual", "euler", "kick_damp_drift"}
    damping : Damping
    stop : float
        Stop once ``λ_max(S)`` exceeds this.

    Returns
    -------
    LayerRun
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    X, Y = np.asarray(X0, float), np.zeros_like(X0) if Y0 is None else np.asarray(Y0, float)
    moments = [second_moment(X)]
    stopped = False
    for layer in range(n_layers):
        t = layer * h
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            if scheme == "residual":
                Xn, Yn = residual_layer(X, velocity, h), Y
            elif scheme == "euler":
                Xn, Yn = euler_layer(X, Y, velocity, force, h, float(damping.rate(t)))
            else:
                Xn, Yn = kick_damp_drift_layer(X, Y, velocity, force, h,
                                               damping.decay(t, h))
            S = second_moment(Xn)
        if not (np.all(np.isfinite(S)) and np.all(np.isfinite(Yn))):
            stopped = True
            break
        X, Y = Xn, Yn
        moments.append(S)
        if np.linalg.eigvalsh(S)[-1] > stop:
            stopped = True
            break
    return LayerRun(np.array(moments), X, Y, stopped)


@dataclass(frozen=True)
class LayerCrossing:
    """First layer whose directional second moment crosses ``θ``.

    Attributes
    ----------
    layer : int or None
        First layer ``l`` with ``m(S_l) ≥ θ`` (``None`` if none within the layers run).
    predicted : int or None
        ``⌈T_θ / h⌉`` from the continuous flow (``None`` if it never crosses).
    crossing_time : float
        Continuous crossing time ``T_θ`` (``inf`` if none).
    moments : ndarray, shape (L + 1,)
        Directional second moment ``m(S_l)`` after each layer.
    h : float
    """

    layer: int | None
    predicted: int | None
    crossing_time: float
    moments: np.ndarray
    h: float


def directional_moment(S: np.ndarray, direction=None):
    """``uᵀ S u`` for a unit ``u``, or ``λ_max(S) = max_u uᵀ S u`` when ``direction`` is None.

    Parameters
    ----------
    S : ndarray, shape (..., d, d)
    direction : array_like, shape (d,), optional

    Returns
    -------
    float or ndarray, shape (...)
    """
    if direction is None:
        return np.linalg.eigvalsh(S)[..., -1]
    u = np.asarray(direction, float)
    u = u / np.linalg.norm(u)
    return np.einsum("i,...ij,j->...", u, S, u)


def layer_crossing(X0, A, V, h: float, theta: float, *, scheme: str = "kick_damp_drift",
                   damping: Damping = NO_DAMPING, direction=None, t_max: float = 50.0,
                   extra_layers: int = 10) -> LayerCrossing:
    """First crossing layer of ``m(S) = θ`` vs the continuous prediction ``⌈T_θ/h⌉``.

    ``"residual"`` discretises the first-order flow ``ẋ_i = V S A x_i`` (continuous
    ``T_θ`` from ``Ṡ = V S A S + S A S V``); ``"euler"`` and ``"kick_damp_drift"``
    discretise the accelerated system with ``Y(0) = 0`` (continuous ``T_θ`` from the
    ``(S, P)`` system with ``P(0) = 0``), Theory page, Part II.

    Parameters
    ----------
    X0 : ndarray, shape (N, d)
    A, V : ndarray, shape (d, d)
    h, theta : float
    scheme : {"residual", "euler", "kick_damp_drift"}
    damping : Damping
    direction : array_like, shape (d,), optional
        Unit direction ``u`` of ``m(S) = uᵀ S u``; default ``λ_max(S)``.
    t_max : float
        Horizon of the continuous search.
    extra_layers : int
        Layers run past the prediction (or past ``t_max/h`` if it never crosses).

    Returns
    -------
    LayerCrossing
    """
    d = A.shape[0]
    S0 = second_moment(X0)

    def size_of(S):
        return float(directional_moment(S, direction)) if np.all(np.isfinite(S)) else np.inf

    if scheme == "residual":
        def fun(t, y):
            return moment_field(y.reshape(d, d), A, V).ravel()
        y0 = S0.ravel()
    else:
        def fun(t, y):
            dS, dP = matrix_field(y[: d * d].reshape(d, d), y[d * d:].reshape(d, d), A, V,
                                  float(damping.rate(t)))
            return np.concatenate([dS.ravel(), dP.ravel()])
        y0 = np.concatenate([S0.ravel(), np.zeros(d * d)])
    if size_of(S0) >= theta:
        t_theta = 0.0
    else:
        t_theta = integrate_until_blowup(fun, y0, t_max,
                                         lambda y: size_of(y[: d * d].reshape(d, d)),
                                         theta).time
    predicted = int(math.ceil(t_theta / h - 1e-9)) if np.isfinite(t_theta) else None
    n_layers = (predicted if predicted is not None else int(math.ceil(t_max / h))) \
        + extra_layers
    if scheme == "residual":
        run = run_layers(X0, None, lambda X: linear_velocity(X, A, V), None, h, n_layers,
                         scheme="residual", stop=max(1e12, 1e3 * theta))
    else:
        run = run_layers(X0, np.zeros_like(X0),
                         lambda X, Y: accelerated_velocity(X, Y, A),
                         lambda X, Y: accelerated_force(X, Y, A, V), h, n_layers,
                         scheme=scheme, damping=damping, stop=max(1e12, 1e3 * theta))
    m = directional_moment(run.S, direction)
    hits = np.nonzero(m >= theta)[0]
    layer = int(hits[0]) if hits.size else (len(m) if run.stopped else None)
    return LayerCrossing(layer, predicted, float(t_theta), m, h)
