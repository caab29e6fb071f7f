"""Damping schedules ``α(t)`` of the accelerated models (Theory page, Part II).

``"constant"``: ``α = c``; ``"nesterov"``: ``α(t) = r/(t + t0) + c`` with ``t0 > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Damping:
    """A damping schedule.

    Attributes
    ----------
    kind : {"constant", "nesterov"}
    c : float
        Constant part ``c ≥ 0``.
    r : float
        Nesterov coefficient ``r ≥ 0`` (unused for ``"constant"``).
    t0 : float
        Nesterov start ``t0 > 0``.
    """

    kind: str = "constant"
    c: float = 0.0
    r: float = 3.0
    t0: float = 1.0

    def __post_init__(self):
        if self.kind not in ("constant", "nesterov"):
            raise ValueError(f"damping must be 'constant' or 'nesterov', got {self.kind!r}")
        if self.c < 0 or self.r < 0 or self.t0 <= 0:
            raise ValueError("damping needs c >= 0, r >= 0 and t0 > 0")

    def rate(self, t):
        """``α(t)``."""
        if self.kind == "constant":
            return self.c + 0.0 * np.asarray(t, float)
        return self.r / (np.asarray(t, float) + self.t0) + self.c

    def integral(self, t: float, h: float) -> float:
        """``∫_t^{t+h} α(s) ds``."""
        out = self.c * h
        if self.kind == "nesterov":
            out += self.r * np.log1p(h / (t + self.t0))
        return float(out)

    def decay(self, t: float, h: float) -> float:
        """``σ = exp(−∫_t^{t+h} α)``, the exact damping factor over one step."""
        return float(np.exp(-self.integral(t, h)))

    @classmethod
    def from_settings(cls, settings) -> Damping:
        """The schedule of a :class:`dynamics.settings.Settings`."""
        return cls(settings.damping, settings.alpha, settings.nesterov_r,
                   settings.nesterov_t0)


NO_DAMPING = Damping("constant", 0.0)
