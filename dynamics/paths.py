"""Prescribed feature paths X(t) of the attention-only model (Theory page).

Each path gives ``X(t)`` and ``dX/dt`` in closed form. The switch path jumps at
``switch_time``; :attr:`FeaturePath.jumps` lists such times so an integrator can
stop on them and account the work of the jump exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FeaturePath:
    """A prescribed feature path.

    Parameters
    ----------
    kind : str
        One of ``static, rotation, oscillation, drift, switch, converging``.
    X0 : ndarray, shape (N, d)
        Features at ``t = 0``.
    Y : ndarray, shape (N, d)
        Direction of the oscillation, drift, switch and converging paths.
    Q : ndarray, shape (d, d)
        Orthonormal basis whose consecutive column pairs span the rotation planes.
    omega, amplitude, switch_time, settle_rate : float
        ω, δ, t_s and μ of the Theory page.
    """

    kind: str
    X0: np.ndarray
    Y: np.ndarray
    Q: np.ndarray
    omega: float
    amplitude: float
    switch_time: float
    settle_rate: float

    @property
    def jumps(self) -> tuple[float, ...]:
        """Times at which X jumps (only the switch path has one)."""
        return (self.switch_time,) if self.kind == "switch" else ()

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``(X(t), dX/dt)``, both of shape (N, d). Right-continuous at jumps."""
        X0, Y, w, a = self.X0, self.Y, self.omega, self.amplitude
        zero = np.zeros_like(X0)
        if self.kind == "static":
            return X0, zero
        if self.kind == "rotation":
            return self._rotation(t)
        if self.kind == "oscillation":
            return X0 + a * np.sin(w * t) * Y, a * w * np.cos(w * t) * Y
        if self.kind == "drift":
            return X0 + t * a * Y, a * Y
        if self.kind == "switch":
            return (X0 + a * Y if t >= self.switch_time else X0), zero
        if self.kind == "converging":
            # X_∞ + e^{−μt}(X_0 − X_∞) with X_∞ = X_0 + δY
            decay = np.exp(-self.settle_rate * t)
            return X0 + a * (1.0 - decay) * Y, a * self.settle_rate * decay * Y
        raise ValueError(f"unknown path {self.kind!r}")

    def _rotation(self, t):
        """Rotate X0 by angle ωt in the planes (q1,q2), (q3,q4), ... of Q."""
        d = self.Q.shape[0]
        pairs = d // 2
        C = self.X0 @ self.Q  # coordinates in the rotation basis
        c, s = np.cos(self.omega * t), np.sin(self.omega * t)
        R = C.copy()
        Rd = np.zeros_like(C)
        u, v = C[:, 0 : 2 * pairs : 2], C[:, 1 : 2 * pairs : 2]
        R[:, 0 : 2 * pairs : 2] = c * u - s * v
        R[:, 1 : 2 * pairs : 2] = s * u + c * v
        Rd[:, 0 : 2 * pairs : 2] = self.omega * (-s * u - c * v)
        Rd[:, 1 : 2 * pairs : 2] = self.omega * (c * u - s * v)
        return R @ self.Q.T, Rd @ self.Q.T
