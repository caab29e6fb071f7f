"""Streaming engine for the Part II models (MODEL.md §10-§13).

State ``Z = (X, Y)`` of shape (2, N, d); one fixed-step classical RK4 step
(order 4, :data:`ORDER`) per ``settings.dt``. Models:

* ``linear``: ``ẋ_i = V S A x_i`` (§10), ``Y ≡ 0``;
* ``linear_accelerated``: damped Hamiltonian particles (§11), ``y_i(0) = P_0 x_i`` with ``P_0 = 0``;
* ``softmax_first_order``: ``ẋ_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j`` (§13), ``Y ≡ 0``;
* ``softmax_inertial``: the inertial softmax system (§13), ``Y(0) = 0``;
* ``softmax_momentum``: the momentum-only control (§13), ``Y(0) = 0``.

Diagnostics ``hamiltonian`` and ``kinetic_energy`` are the ``H`` of §11 (particle
form) for ``linear_accelerated`` and of §13 for ``softmax_inertial``; the first-order
models have no ``H`` and report 0.0 for both; the momentum-only control reports
``hamiltonian = 0.0`` and ``kinetic_energy = ½ ‖Y‖²``.
"""

from __future__ import annotations

import numpy as np

from ..frame import DIVERGED, RUNNING, Frame
from ..integrators import Workspace
from ..settings import PART_II_MODELS, Settings
from .accelerated import (
    accelerated_dissipation,
    accelerated_hamiltonian,
    accelerated_kinetic,
)
from .clouds import initial_cloud, second_moment
from .damping import Damping
from .integrators import RK4_ORDER, rk4_step
from .linear import linear_velocity
from .matrices import model_matrices, value_kernel_ratio
from .softmax import (
    inertial_energies,
    inertial_parts,
    softmax_kernel,
    softmax_velocity,
)

ORDER = RK4_ORDER
#: Models whose energy can only decrease (dH/dt ≤ 0, MODEL.md §11, §13).
_DISSIPATIVE = ("linear_accelerated", "softmax_inertial")
SOFTMAX_MODELS = ("softmax_first_order", "softmax_inertial", "softmax_momentum")
SECOND_ORDER_MODELS = ("linear_accelerated", "softmax_inertial", "softmax_momentum")


def model_field(model: str, A: np.ndarray, V: np.ndarray, B: np.ndarray | None,
                damping: Damping):
    """The vector field ``(t, Z) -> Ż`` of a Part II model, ``Z`` of shape (2, N, d).

    Parameters
    ----------
    model : str
        One of ``dynamics.settings.PART_II_MODELS``.
    A, V : ndarray, shape (d, d)
    B : ndarray, shape (d, d) or None
        ``V A⁻¹`` (needed by ``softmax_inertial``).
    damping : Damping

    Returns
    -------
    callable
    """
    work = Workspace()  # the N×N buffer of the softmax fields, reused from call to call

    def pack(dx, dy=None):
        out = np.empty((2, *dx.shape))
        out[0] = dx
        if dy is None:
            out[1] = 0.0
        else:
            out[1] = dy
        return out

    if model == "linear":
        def f(t, Z):
            return pack(linear_velocity(Z[0], A, V))
    elif model == "softmax_first_order":
        def f(t, Z):
            return pack(softmax_velocity(Z[0], A, V, work, spd=True))
    elif model == "linear_accelerated":
        def f(t, Z):
            X, Y = Z
            G = X.T @ Y  # shared by the velocity and the force
            n = X.shape[0]
            dY = X @ V
            dY -= Y @ (G.T @ A) / n
            dY -= damping.rate(t) * Y
            return pack(X @ (A @ G) / n, dY)
    elif model == "softmax_inertial":
        def f(t, Z):
            X, Y = Z
            dX, force = inertial_parts(X, Y, A, B, work)
            force -= damping.rate(t) * Y
            return pack(dX, force)
    elif model == "softmax_momentum":
        def f(t, Z):
            X, Y = Z
            dY = softmax_velocity(X, A, V, work, spd=True)
            dY -= damping.rate(t) * Y
            return pack(Y, dY)
    else:
        raise ValueError(f"model must be one of {PART_II_MODELS}, got {model!r}")
    return f


def energies(model: str, X, Y, A, V, B) -> tuple[float, float, float]:
    """``(H, kinetic, Σ y·∂H/∂y)`` of a model at ``(X, Y)`` (zeros where there is no H)."""
    if model == "linear_accelerated":
        return (accelerated_hamiltonian(X, Y, A, V), accelerated_kinetic(X, Y, A),
                accelerated_dissipation(X, Y, A))
    if model == "softmax_inertial":
        return inertial_energies(X, Y, A, B)
    if model == "softmax_momentum":
        k = 0.5 * float(np.sum(Y * Y))
        return 0.0, k, 2.0 * k
    return 0.0, 0.0, 0.0


class InertialEngine:
    """Step a Part II model with fixed RK4 steps and report :class:`Frame` s.

    Parameters
    ----------
    settings : Settings
        Read at construction (model, sizes, matrices, cloud, seed) and at every
        :meth:`advance` (``dt``, damping, ``norm_limit``).

    Raises
    ------
    ValueError
        Invalid ``kernel_diag``/``value_diag``, ``A`` not positive definite,
        ``B = V A⁻¹`` not SPD (``softmax_inertial``), or ``n_tokens < dim``.
    """

    order = ORDER

    def __init__(self, settings: Settings):
        if settings.model not in PART_II_MODELS:
            raise ValueError(f"InertialEngine runs {PART_II_MODELS}, got {settings.model!r}")
        self.settings = settings
        self.model = settings.model
        rng = np.random.default_rng(settings.seed)
        d, n = settings.dim, settings.n_tokens
        self.A, self.V = model_matrices(settings.kernel_diag, settings.value_diag, d,
                                        settings.matrix_draw, rng)
        self.B = value_kernel_ratio(self.A, self.V) if self.model == "softmax_inertial" \
            else None
        self.X0 = initial_cloud(settings.cloud, n, d, settings.second_moment, rng)
        P0 = np.zeros((d, d))
        self.Y0 = self.X0 @ P0.T  # y_i(0) = P0 x_i(0) with P0 = 0 (§11)
        self.reset()

    def reset(self) -> None:
        """Back to ``t = 0`` and the initial cloud."""
        self.t = 0.0
        self.Z = np.stack([self.X0, self.Y0])
        self.status = RUNNING
        self.message = ""
        self.diverged_at: float | None = None
        self.steps = 0
        self._energy = None  # H of the current state, once measured
        self._field_changes = None  # settings.changes when the field below was built
        self._field = None

    @property
    def damping(self) -> Damping:
        """The current damping schedule (read from the settings)."""
        return Damping.from_settings(self.settings)

    def _measure(self, Z):
        """``(feature norm, λ_max, λ_min, H, kinetic, dissipation)`` or None if non-finite."""
        X, Y = Z
        if not np.all(np.isfinite(Z)):
            return None
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            S = second_moment(X)
            if not np.all(np.isfinite(S)):
                return None
            lam = np.linalg.eigvalsh(S)
            vals = (float(np.linalg.norm(X)), float(lam[-1]), float(lam[0]),
                    *energies(self.model, X, Y, self.A, self.V, self.B))
        return vals if np.all(np.isfinite(vals)) else None

    def advance(self, n: int) -> None:
        """Take ``n`` RK4 steps of ``settings.dt``; stop early on divergence.

        Divergence: a non-finite state or energy (the last finite state is kept), or
        the feature norm or ``λ_max(S)`` above ``settings.norm_limit``.
        """
        if self.status != RUNNING:
            return
        s = self.settings
        if self._field_changes != s.changes:  # the damping schedule may have changed
            self._field_changes = s.changes
            self._field = model_field(self.model, self.A, self.V, self.B, self.damping)
        f = self._field
        if self._energy is None:
            start = self._measure(self.Z)
            self._energy = start[3] if start is not None else np.inf
        h, limit = s.dt, s.norm_limit
        for _ in range(int(n)):
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                Z = rk4_step(f, self.t, self.Z, h)
            vals = self._measure(Z)
            if vals is None:
                self._diverge(self.t + h, "state or energy became non-finite")
                return
            H_before = self._energy
            self.Z, self.t = Z, self.t + h
            self._energy = vals[3]
            self.steps += 1
            if vals[0] > limit:
                self._diverge(self.t, f"feature norm exceeded {limit:g}")
                return
            if vals[1] > limit:
                self._diverge(self.t, f"second moment exceeded {limit:g}")
                return
            if float(np.linalg.norm(Z[1])) > limit:
                self._diverge(self.t, f"momentum norm exceeded {limit:g}")
                return
            if self.model in _DISSIPATIVE and vals[3] > H_before + 1e-6 * (1.0 + abs(H_before)):
                self._diverge(self.t, "the energy increased although dH/dt ≤ 0 "
                                      "(the step is too large for this state; lower dt)")
                return

    def _diverge(self, t: float, reason: str) -> None:
        self.status = DIVERGED
        self.diverged_at = float(t)
        self.message = f"diverged at t = {t:.3f}: {reason}"

    def diagnostics(self) -> dict:
        """Scalar diagnostics of the current state (all finite)."""
        vals = self._measure(self.Z)
        if vals is None:  # cannot happen for an accepted state; be safe
            vals = (0.0,) * 6
        norm, lmax, lmin, H, kin, diss = vals
        alpha = float(self.damping.rate(self.t))
        return {
            "t": float(self.t),
            "second_moment_max": lmax,
            "second_moment_min": lmin,
            "hamiltonian": H,
            "kinetic_energy": kin,
            "dissipation_rate": alpha * diss if self.model in SECOND_ORDER_MODELS else 0.0,
            "feature_norm": norm,
            "momentum_norm": float(np.linalg.norm(self.Z[1])),
            "damping": alpha,
        }

    def frame(self) -> Frame:
        """The current :class:`Frame` (attention = softmax kernel weights for softmax models)."""
        X, Y = self.Z[0].copy(), self.Z[1].copy()
        attention = None
        if self.model in SOFTMAX_MODELS:
            with np.errstate(under="ignore"):
                attention = softmax_kernel(X, self.A)
        return Frame(t=float(self.t), features=X, momenta=Y, attention=attention,
                     diagnostics=self.diagnostics(), status=self.status,
                     message=self.message)
