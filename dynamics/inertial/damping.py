"""Damping schedules ``α(t)`` of the accelerated models (Theory page, Part II).

``"constant"``: ``α = c``; ``"nesterov"``: ``α(t) = r/(t + t0) + c`` with ``t0 ≥ 0``.
``t0 = 0`` (Su–Boyd–Candès's start) makes ``α`` infinite at ``t = 0``: only a model whose
momenta start at rest and whose field takes the limit there runs it (:attr:`Damping.singular`;
Theory page, "Momentum on a quadratic": ``ẋ ≈ −t ∇f(x₀)/(1 + r)`` near 0, so ``α ẋ``
stays finite).
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
        Nesterov start ``t0 ≥ 0`` (``0``: see :attr:`singular`).
    """

    kind: str = "constant"
    c: float = 0.0
    r: float = 3.0
    t0: float = 1.0

    def __post_init__(self):
        if self.kind not in ("constant", "nesterov"):
            raise ValueError(f"damping must be 'constant' or 'nesterov', got {self.kind!r}")
        if self.c < 0 or self.r < 0 or self.t0 < 0:
            raise ValueError("damping needs c >= 0, r >= 0 and t0 >= 0")

    @property
    def singular(self) -> bool:
        """``α = r/t + c`` with ``r > 0``: infinite at ``t = 0`` (``t0 = 0``)."""
        return self.kind == "nesterov" and self.t0 == 0 and self.r > 0

    def rate(self, t):
        """``α(t)`` (``inf`` at ``t = 0`` when :attr:`singular`)."""
        if self.kind == "constant" or self.r == 0:
            return self.c + 0.0 * np.asarray(t, float)
        with np.errstate(divide="ignore"):
            return self.r / (np.asarray(t, float) + self.t0) + self.c

    def integral(self, t: float, h: float) -> float:
        """``∫_t^{t+h} α(s) ds`` (``inf`` from ``t = 0`` when :attr:`singular`)."""
        out = self.c * h
        if self.kind == "nesterov" and self.r > 0:
            with np.errstate(divide="ignore"):
                out += self.r * np.log1p(h / np.float64(t + self.t0))
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
