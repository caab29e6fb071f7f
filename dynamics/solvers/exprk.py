"""Accuracy on request for a stiff canonical run: an exponential Runge–Kutta method.

When the relaxation is stiff (``λ = γ/β`` above :data:`~dynamics.solvers.explicit.EXPLICIT_RATE`),
the stiffness of the canonical model sits in one linear term. In the fused system of
:func:`~dynamics.solvers.explicit.canonical_field`, ``y = [X, P, Z, ∫D]``, the logits are stepped
as their distance to the scores, ``W = Z − βS(X)``:

    Ẇ = −λ W − β dS/dt,      u = [X, P, W, ∫D],   u̇ = L u + N(u),
    L = −λ on W and 0 elsewhere,   N(u) = f(u) − L u   (on W: ``−β dS/dt``).

``N`` is then bounded whatever ``λ`` (in ``Z`` its part on the logits would be ``λβS``,
of size ``λ``: the same steps lose two orders at λh ≈ 10 and more, see the tests), and
``X``, ``P``, ``∫D`` are not stiff. :class:`ExpRK4` steps ``u`` with the five-stage
exponential Runge–Kutta method of stiff order 4 of Hochbruck & Ostermann ("Explicit
exponential Runge–Kutta methods for semilinear parabolic problems", SIAM J. Numer. Anal.
43, 2005; "Exponential integrators", Acta Numerica 19, 2010, §2), with
``φ_{k,i} = φ_k(c_i h L)``, ``φ_k = φ_k(h L)``, ``c = (0, ½, ½, 1, ½)``:

    a₂₁ = ½φ₁,₂
    a₃₁ = ½φ₁,₃ − φ₂,₃              a₃₂ = φ₂,₃
    a₄₁ = φ₁,₄ − 2φ₂,₄              a₄₂ = a₄₃ = φ₂,₄
    a₅₂ = a₅₃ = ½φ₂,₅ − φ₃,₄ + ¼φ₂,₄ − ½φ₃,₅
    a₅₄ = ¼φ₂,₅ − a₅₂               a₅₁ = ½φ₁,₅ − 2a₅₂ − a₅₄
    b₁ = φ₁ − 3φ₂ + 4φ₃   b₂ = b₃ = 0   b₄ = −φ₂ + 4φ₃   b₅ = 4φ₂ − 8φ₃,

``U_i = e^{c_i hL} u₀ + h Σ_j a_ij G_j``, ``G_j = N(U_j)``, ``u₁ = e^{hL} u₀ + h Σ b_i G_i``.
``L`` is diagonal with two values, so every coefficient is a pair of scalars, the
φ-functions of ``0`` and of ``−λh`` (:func:`phis`). At ``L = 0`` the method is a classical
Runge–Kutta method of order 4. The tests check the coefficients' conditions and measure
order 4 of ``X, P, Z`` at fixed steps for λh from 0.125 to 100.

Error estimate. (1) Embedded, from the same stages: the weights
``b̂ = (φ₁ − 3φ₂ + 4φ₃, 2φ₂ − 4φ₃, 2φ₂ − 4φ₃, −φ₂ + 4φ₃, 0)`` satisfy ``Σb̂ = φ₁``,
``Σb̂c = φ₂``, ``Σb̂c²/2 = φ₃`` (classical order 3 at ``L = 0``), and
``u₁ − û₁ = h(2φ₂ − 4φ₃)(2G₅ − G₂ − G₃)`` estimates the local error of the third-order
solution, an upper estimate of that of ``u₁`` (as RK45 controls its fifth-order result
with a fourth-order estimate). (2) The relaxation layer: off its slow manifold
(``W* ≈ −(β/λ) dS/dt``, e.g. from a uniform or random ``A(0)``) ``W`` decays like
``e^{−λs}ℓ``, ``ℓ = W − W* = −Ẇ/λ``; the momenta integrate its effect on the force with the
weights of the stages, whose layers are ``ℓ, e^{−λh/2}ℓ, e^{−λh}ℓ`` — the estimate (1)
does not see the first stage's, and at ``λh ≫ 1`` that error is ``≈ h/6 · ∂Ṗ/∂Z·ℓ``. Its
first-order term ``h κ(−λh) ∂Ṗ/∂Z·ℓ``, ``κ(z) = 1/6 + e^z/6 + (2/3)e^{z/2} − φ₁(z)``, is
added to the estimate (:meth:`ExponentialStepper.layer_error`, no field evaluation).
Without it the benchmark run's error stalled near 2e-6 whatever rtol; with it the error
follows rtol (rtol 1e-6: 5.8e-7, 1e-7: 4.6e-8). From an O(1) layer (random ``A(0)``) the
runs are still 20–50 times less accurate than rtol (the layer's higher-order terms).
The estimate is measured as ``solve_ivp`` measures its own (RMS of
``difference / (atol + rtol · max(|y₀|, |y₁|))`` over ``X, P, Z``) and the standard
controller chooses the next step, ``h · min(5, max(0.2, 0.9 err^{−1/4}))`` (no growth right
after a rejection).

Dissipated energy. The solver's own ``∫D`` component is only of order 3 at large λh (its
rate ``(λ/β) Σ Var_A(W)`` has Lipschitz constant ``∝ λ|W|`` in the stages), so it is left
out of the estimate and the reported ``∫D`` is the energy balance of the canonical model
(no work): ``∫D(t) = ∫D(t₀) + H(t₀) − H(t)`` — as accurate as ``H``; on this branch the
``energy_residual`` diagnostic is therefore zero to rounding and checks nothing.

Everything else is the explicit branch's (:class:`~dynamics.solvers.explicit.ExplicitStepper`:
first step, tracking bound by quadrature on each step, a step crossing the norm limit
ending at the crossing); the field at each step's end is the next step's first stage.
Per kept step: 5 evaluations of the field; per rejected step: 4.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .. import energy as en
from ..logits import centre_rows
from ..models import canonical
from ..models.canonical import CanonicalProblem
from .explicit import EXPLICIT_RATE, ExplicitStepper

#: Step-size factors of the controller: safety, smallest and largest change.
SAFETY, SHRINK, GROW = 0.9, 0.2, 5.0
#: Below this ``|z|`` the φ-functions are summed from their series.
SERIES_BELOW = 1.0
#: Terms of that series (``1/(SERIES_TERMS + 3)! < 1e-19``).
SERIES_TERMS = 18
#: Stage times.
C = (0.0, 0.5, 0.5, 1.0, 0.5)


def phis(z: float) -> tuple[float, float, float]:
    """``(φ₁(z), φ₂(z), φ₃(z))``, ``φ_k(z) = Σ_m z^m/(m + k)!`` (``φ₁ = (e^z − 1)/z``,
    ``φ_{k+1} = (φ_k − 1/k!)/z``): by the series for ``|z| <`` :data:`SERIES_BELOW`, by the
    recurrence from ``expm1`` beyond (no cancellation worse than a factor 6 there)."""
    if abs(z) < SERIES_BELOW:
        out = []
        for k in (1, 2, 3):
            term = 1.0 / math.factorial(k)
            total = term
            for m in range(1, SERIES_TERMS):
                term *= z / (m + k)
                total += term
            out.append(total)
        return out[0], out[1], out[2]
    p1 = math.expm1(z) / z
    p2 = (p1 - 1.0) / z
    return p1, p2, (p2 - 0.5) / z


def coefficients(z: float) -> np.ndarray:
    """The method's scalar coefficients at ``hL = z``, in the order
    ``e^{z/2}, e^{z}, a21, a31, a32, a41, a42, a51, a52, a54, b1, b4, b5, e``
    (``e = 2φ₂ − 4φ₃``, the weight of the error estimate)."""
    p1h, p2h, p3h = phis(0.5 * z)  # c = ½: stages 2, 3, 5
    p1, p2, p3 = phis(z)  # c = 1: stage 4 and the weights
    a52 = 0.5 * p2h - p3 + 0.25 * p2 - 0.5 * p3h
    a54 = 0.25 * p2h - a52
    return np.array([
        math.exp(0.5 * z), math.exp(z),
        0.5 * p1h,
        0.5 * p1h - p2h, p2h,
        p1 - 2.0 * p2, p2,
        0.5 * p1h - 2.0 * a52 - a54, a52, a54,
        p1 - 3.0 * p2 + 4.0 * p3, -p2 + 4.0 * p3, 4.0 * p2 - 8.0 * p3,
        2.0 * p2 - 4.0 * p3])


def exponential_suits(problem) -> str | None:
    """Why :class:`ExponentialStepper` should not run ``problem``, or None when it should:
    a single-head canonical model whose relaxation rate exceeds
    :data:`~dynamics.solvers.explicit.EXPLICIT_RATE` (below it, DOP853 is cheaper)."""
    if type(problem) is not CanonicalProblem:
        return f"{type(problem).__name__} has no fused field for the exponential branch"
    if problem.relaxation_rate <= EXPLICIT_RATE:
        return (f"relaxation not stiff: λ = γ/β = {problem.relaxation_rate:g} is at most "
                f"{EXPLICIT_RATE:g}")
    return None


class ExpRK4:
    """The exponential Runge–Kutta pair of the module docstring on ``ẏ = f(y)`` with
    ``L = −lam`` on the components where ``stiff`` is True; the interface of scipy's
    ``OdeSolver`` that :class:`~dynamics.solvers.explicit.ExplicitStepper` uses (``t``, ``y``,
    ``f``, ``step()``, ``status``, ``nfev``, ``dense_output()``); :meth:`attempt` and
    :meth:`inner` show the inside of one step."""

    def __init__(self, field, t0, y0, t_bound, *, rtol, atol, first_step, lam, stiff,
                 measured=None, shift=None, shift_rate=None, layer=None):
        self.field, self.t, self.y, self.t_bound = field, t0, y0, t_bound
        self.rtol, self.atol, self.lam = rtol, atol, lam
        self.f = field(t0, y0)
        self.nfev = 1
        self.h = first_step
        self.status = "running" if t0 < t_bound else "finished"
        self.rejected = 0
        self._L = np.where(stiff, -lam, 0.0)
        self._mask = stiff.astype(float)
        self._zs = stiff
        self._shift, self._shift_rate = shift, shift_rate
        self._layer = layer
        #: components in the error estimate (all by default)
        self._measured = slice(None) if measured is None else measured
        self._plain = coefficients(0.0)
        self._cache = (None, None)
        self._after_rejection = False
        self._last = None

    def _coefficients(self, h):
        """Per-component coefficient vectors, shape (14, n), for step ``h``."""
        if self._cache[0] != h:
            stiff = coefficients(-self.lam * h)
            table = self._plain[:, None] + (stiff - self._plain)[:, None] * self._mask
            self._cache = (h, table)
        return self._cache[1]

    def attempt(self, t0, y0, f0, h):
        """``(y₁, y₁ − ŷ₁)`` of one step ``h`` from ``(t0, y0)`` with ``f0 = f(y0)``."""
        (E2, E1, a21, a31, a32, a41, a42, a51, a52, a54, b1, b4, b5, e) = \
            self._coefficients(h)
        field = self._inner_field
        L = self._L
        u0, g0 = self.inner(y0, f0)
        G1 = g0 - L * u0
        Ey = E2 * u0
        U2 = Ey + h * a21 * G1
        G2 = field(t0 + 0.5 * h, U2) - L * U2
        U3 = Ey + h * (a31 * G1 + a32 * G2)
        G3 = field(t0 + 0.5 * h, U3) - L * U3
        U4 = E1 * u0 + h * (a41 * G1 + a42 * (G2 + G3))
        G4 = field(t0 + h, U4) - L * U4
        U5 = Ey + h * (a51 * G1 + a52 * (G2 + G3) + a54 * G4)
        G5 = field(t0 + 0.5 * h, U5) - L * U5
        self.nfev += 4
        u1 = E1 * u0 + h * (b1 * G1 + b4 * G4 + b5 * G5)
        y1 = self._outer(u1)
        diff = h * e * (2.0 * G5 - G2 - G3)
        if self._layer is not None:
            diff += self._layer(y0, g0, h)
        return y1, diff

    def inner(self, y, f):
        """``(u, g)``: the state with the logits' shift ``σ(y)`` taken away, and its rate."""
        if self._shift is None:
            return y, f
        u, g = y.copy(), f.copy()
        u[self._zs] -= self._shift(y)
        g[self._zs] -= self._shift_rate(y, f)
        return u, g

    def _outer(self, u):
        if self._shift is None:
            return u
        y = u.copy()
        y[self._zs] += self._shift(u)
        return y

    def _inner_field(self, t, u):
        """The rate of ``u``: the field at ``u``'s outer state, its logits' part shifted."""
        if self._shift is None:
            return self.field(t, u)
        y = u.copy()
        y[self._zs] += self._shift(u)  # u and y share X
        f = self.field(t, y)
        f[self._zs] -= self._shift_rate(y, f)
        return f

    def _error(self, y0, y1, diff) -> float:
        m = self._measured
        scale = self.atol + self.rtol * np.maximum(np.abs(y0[m]), np.abs(y1[m]))
        r = diff[m] / scale
        return math.sqrt(float(np.vdot(r, r)) / r.size)

    def step(self):
        """One kept step (rejected ones are tried again shorter); ``None`` (scipy's
        convention: a message on failure)."""
        t0, y0, f0 = self.t, self.y, self.f
        smallest = 1e-12 * max(abs(self.t_bound), 1.0)
        while True:
            h = self.h
            last = t0 + h >= self.t_bound * (1.0 - 1e-14) or self.t_bound - t0 - h <= smallest
            if last:
                h = self.t_bound - t0
            with np.errstate(over="raise", invalid="raise"):
                try:
                    y1, diff = self.attempt(t0, y0, f0, h)
                    err = self._error(y0, y1, diff)
                except FloatingPointError:
                    err = math.inf
            if not math.isfinite(err):
                err = math.inf
            if err <= 1.0:
                factor = GROW if err == 0.0 else min(GROW, max(SHRINK, SAFETY * err ** -0.25))
                if self._after_rejection:
                    factor = min(factor, 1.0)
                self._after_rejection = False
                if not last or factor < 1.0:
                    self.h = h * factor
                break
            self.rejected += 1
            self._after_rejection = True
            if h <= smallest:
                self.status = "failed"
                return f"the step fell below {smallest:.3g}"
            self.h = h * (SHRINK if math.isinf(err) else max(SHRINK, SAFETY * err ** -0.25))
        self._last = (t0, y0, f0)
        self.t = self.t_bound if last else t0 + h
        self.y = y1
        self.f = self.field(self.t, y1)
        self.nfev += 1
        if last:
            self.status = "finished"
        return None

    def dense_output(self):
        """``y(t)`` inside the last step, by a step of the method from its start (of the
        method's order; used only to locate where a run crosses its norm limit)."""
        t0, y0, f0 = self._last

        def at(t):
            return y0 if t == t0 else self.attempt(t0, y0, f0, t - t0)[0]

        return at


class ExponentialStepper(ExplicitStepper):
    """:class:`~dynamics.solvers.explicit.ExplicitStepper` with :class:`ExpRK4` in place of
    DOP853: one kept exponential step per :meth:`step` (stiff canonical runs)."""

    order = 4
    method = "exponential RK4"
    #: its error estimate is that of the embedded third-order solution
    estimator_order = 3
    bound_smooth = 1.0

    def __init__(self, problem, **kwargs):
        super().__init__(problem, **kwargs)
        self._rejected_done = 0
        self._balance = None

    def _retire(self):
        if self._solver is not None:
            self._rejected_done += self._solver.rejected
        super()._retire()

    def _new_solver(self, t0, y0, h):
        stiff = np.zeros(y0.size, dtype=bool)
        nz = y0.size - 2 * self._nx - 1
        stiff[2 * self._nx:2 * self._nx + nz] = True
        # the balance's reference point: ∫D(t) = ∫D(t0) + H(t0) − H(t) (see finish)
        self._balance = (y0[-1], self._energy(y0))
        return ExpRK4(self._field, t0, y0, self.t_end, rtol=self.rtol, atol=self.atol,
                      first_step=h, lam=self.problem.relaxation_rate, stiff=stiff,
                      measured=slice(0, y0.size - 1),
                      shift=self.scores, shift_rate=self.score_rate,
                      layer=self.layer_error)

    def layer_error(self, y, g, h):
        """The local error of a step ``h`` from ``y`` (inner rate ``g``) caused by the
        relaxation layer ``ℓ = W − W* = −g_W/λ``: the momenta's quadrature of ``e^{−λs}ℓ``,
        ``h κ(−λh) ∂Ṗ/∂Z·ℓ`` with ``κ(z) = 1/6 + e^z/6 + (2/3)e^{z/2} − φ₁(z)`` (Simpson's
        weights on the stage layers against the exact integral), zero elsewhere."""
        nx, prob = self._nx, self.problem
        n = prob.M.shape[0]
        lam = prob.relaxation_rate
        N = nx // n
        zs = slice(2 * nx, 2 * nx + N * N)
        ell = g[zs].reshape(N, N) / -lam
        z = -lam * h
        kappa = 1.0 / 6.0 + math.exp(z) / 6.0 + 2.0 / 3.0 * math.exp(0.5 * z) - phis(z)[0]
        out = np.zeros(y.size)
        if kappa == 0.0:
            return out
        X = y[:nx].reshape(N, n)
        A = en.rowsoftmax(centre_rows(y[zs].reshape(N, N)), centred=True)
        dA = A * (ell - np.sum(A * ell, axis=1, keepdims=True))
        dF = dA.T @ (X @ prob.M) + dA @ (X @ prob.M.T)
        if prob.fixed:
            dF[:, -prob.fixed:] = 0.0
        out[nx:2 * nx] = (h * kappa) * dF.ravel()
        return out

    def scores(self, y):
        """``βS(X)``, flat, of a solver state (the logits' slow part)."""
        nx, prob = self._nx, self.problem
        n = prob.M.shape[0]
        X = y[:nx].reshape(-1, n)
        return prob.beta * ((X @ prob.M) @ X.T).ravel()

    def score_rate(self, y, f):
        """``β dS/dt`` with ``dX/dt = f_X``, flat."""
        nx, prob = self._nx, self.problem
        n = prob.M.shape[0]
        X, V = y[:nx].reshape(-1, n), f[:nx].reshape(-1, n)
        XMVt = (X @ prob.M) @ V.T
        return prob.beta * (XMVt + ((V @ prob.M) @ X.T)).ravel()

    def _energy(self, y):
        """``H`` of a solver state ``y = [X, P, Z, ∫D]``."""
        nx = self._nx
        n = math.isqrt(y.size - 2 * nx - 1)
        X = y[:nx].reshape(n, -1)
        P = y[nx:2 * nx].reshape(n, -1)
        Z = centre_rows(y[2 * nx:-1].reshape(n, n))
        return canonical.hamiltonian(self.problem, X, P, en.rowsoftmax(Z, centred=True),
                                     en.log_rowsoftmax(Z))

    def finish(self, state, carry):
        """As the explicit branch's, with ``∫D`` from the energy balance of the step's run
        (``H(t0) + ∫D(t0) = H(t) + ∫D(t)``: no work on the canonical model), not from the
        solver's component (see the module docstring)."""
        state, carry = super().finish(state, carry)
        if state.A is not None and self._balance is not None:
            D0, H0 = self._balance
            H = canonical.hamiltonian(self.problem, state.X, state.P, state.A,
                                      en.log_rowsoftmax(state.Z), S=state.S)
            state = replace(state, dissipated=D0 + H0 - H)
        return state, carry

    @property
    def rejected(self) -> int:
        return self._rejected_done + (0 if self._solver is None else self._solver.rejected)


__all__ = ["ExpRK4", "ExponentialStepper", "coefficients", "exponential_suits", "phis"]
