"""Time means over a stiff step of attention and dissipation, along the exact logit path
(Theory page: "The Fisher–Rao attention flow", "Tracking the moving softmax").

With effective scores linear in time over a step, ``Ŝ(s) = Ŝ₀ + (s/h)ΔŜ``, the exact logit
step follows ``Z(s) = βŜ(s) + L + u W₀`` with ``u = e^{−λs}``, the steady lag
``L = −βΔŜ/(λh)`` and ``W₀ = Z₀ − βŜ₀ − L`` (its transient). Attention on the lagged target
``softmax(βŜ(s) + L)`` moves slowly, and the trapezoidal rule integrates it to second
order at any ``λh``; the transient ``u W₀`` decays in ``1/λ``, which a stiff step does not
resolve. What the rule misses of it:

* :func:`tracking_correction` — while the transient is small (attention tracks its lagged
  target: every step of a smooth run), to first order in ``W₀``, in closed form. Without
  it a stiff step's dissipation lags half a step (``D`` at its start is that of the
  previous step's lag): an ``O(h)`` relative error of ``∫D``.
* :func:`transient_mean` — a fast transient from a distant start: the step's mean
  attention, the relaxation towards the frozen lagged target integrated in ``u`` and its
  first-order response to the moving scores; :func:`path_dissipation` then gives the
  step's ``∫D`` from the free-energy balance along its path.

Where a stiff step takes the scores cubic in time (the attention model's, value
matching's and the cotangent lift's), its tracking test and correction read the transient
off that cubic path (:func:`hermite_transient`: off the linear one, the steady lag
``O(h S̈/λ)`` would count as a transient); :func:`transient_mean` and
:func:`path_dissipation` keep the linear path, exact for scores linear in time. A fast
transient from a distant start is taken in sub-steps (:mod:`.grading`).

(Used by :class:`~dynamics.steppers.exact_logit.ExactLogit`,
:class:`~dynamics.steppers.etd_verlet.EtdVerlet` and
:class:`~dynamics.steppers.etd_heun.EtdHeun` on steps with ``λh`` above
``STIFF_LAMBDA_H``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import energy as en
from ..energy import max_reduce
from ..logits import axpy, logit_step, phi1
from ..relaxation import simpson_panels

#: A transient whose rows oscillate by at most this is small (:func:`tracking_correction`
#: takes it). The limit is on ``W₀`` itself, not on what it moves over a step
#: (``osc(W₀)(1 − e^{−λh}) ≤ 0.01``, the earlier test): the correction's remainder,
#: ``O(W₀²)`` times the step's trapezoid defects (``O((λh)²)``), is then ``O(h³)`` per step
#: as ``h`` falls, where with ``W₀`` up to ``0.01/(λh)`` it was ``O(h)`` on every step of a
#: decaying transient, whose count grows like ``1/h`` (cotangent lift, λh = 1: ``∫D`` of
#: order 1.41, now 2.02). With 0.01 here the stiff order test of the cotangent lift, whose
#: steps at λh = 0.31 then took the transient's mean, measured 2.28 (2.22 before; 2.20 now).
TRANSIENT_OSC = 3e-2
#: Arrays up to this size try the quick sufficient test of :func:`tracks` first.
QUICK_TRACK_SIZE = 4096


#: A graded sub-step of the cotangent lift (:class:`~.etd_heun.EtdHeun`) takes the tracking
#: correction only when its transient oscillates by at most ``SUBSTEP_OSC`` (not
#: :data:`TRANSIENT_OSC`; value matching's sub-steps measured worse with it, their
#: feedback's transient being off the frozen relaxation anyway): the correction's remainder,
#: ``O(W₀²)``, does not fall with ``h`` on sub-steps whose size is fixed by ``1/λ``. The
#: cotangent lift at λh = 100 (dt = 0.005, sub-steps of λδ = 1.56) erred by 6.7e-9 in ∫D on
#: the one sub-step where the decaying transient crossed below 0.03 (at 0.0165); the first
#: step's error, 6.9e-9, 5.8e-9, 2.5e-9 at dt = 0.005 … 0.00125, fell to 3.9e-11, 9.7e-12,
#: −1.1e-12.
SUBSTEP_OSC = 1e-3


#: Steps (and sub-steps) with ``λh`` above this may take the scores cubic in time: below
#: it the cubic's ``1/(λh)³`` terms cancel to rounding (``12ε/(λh)³``: 1.3e-6 here).
CUBIC_LAMBDA_H = 1e-3


def tracks(W0, dev, limit=TRANSIENT_OSC) -> bool:
    """Whether the transient is small: every row oscillation of ``W0`` is at most
    ``limit`` (:data:`TRANSIENT_OSC`; :data:`SUBSTEP_OSC` on a graded sub-step of the
    cotangent lift).

    Small arrays first try the sufficient test ``max_ij |W0_ij − W0_i0| ≤ 0.49 osc``
    (one full reduction instead of two row reductions and a third): with rounding, both
    halves of the oscillation then stay below half the limit. The exact test decides
    whenever it fails, so the answer is always that of the exact test. ``dev`` is scratch
    shaped like ``W0``.
    """
    if W0.size <= QUICK_TRACK_SIZE:
        dev = np.subtract(W0, W0[:, :1], out=dev)
        if float(max_reduce(np.abs(dev, out=dev), None)) <= 0.49 * limit:
            return True
    return float(max_reduce(en.oscillation(W0), None)) <= limit


def lagged_start(Z0, S0, S1, beta, ell, out):
    """``W₀ = Z₀ − βŜ₀ − L`` with the lag ``L = ℓ (Ŝ₁ − Ŝ₀)``, ``ℓ = −β/(λh)``, into ``out``
    (up to row constants: every use ignores them)."""
    W0 = np.multiply(S0, ell - beta, out=out)
    W0 += Z0
    return axpy(-ell, S1, W0)


def hermite_lag(lam, h):
    """``(c, c₀, c₁)`` of :func:`hermite_transient`."""
    x = lam * h
    return (1.0 / x + 6.0 / x**2 + 12.0 / x**3, -h * (1.0 / x + 4.0 / x**2 + 6.0 / x**3),
            -h * (2.0 / x**2 + 6.0 / x**3))


def hermite_transient(W0, dS, S0_dot, S1_dot, beta, lam, h, out):
    """The transient of a step whose scores are cubic in time (their Hermite interpolation
    ``q``, :func:`~dynamics.logits.hermite_logit_step`), into ``out``: the logits minus
    their lagged path ``β(q − q′/λ + q″/λ² − q‴/λ³)`` at the start, from
    :func:`lagged_start`'s ``W₀`` (linear scores). With ``x = λh``: ``W₀ − β(c ΔŜ + c₀ h Ṡ₀
    + c₁ h Ṡ₁)``, ``c = 1/x + 6/x² + 12/x³``, ``c₀ = −(1/x + 4/x² + 6/x³)``,
    ``c₁ = −(2/x² + 6/x³)`` (up to row constants).

    While attention tracks a target whose scores curve, this is what the cubic leaves out,
    where ``W₀`` keeps the steady ``β S̈ (1/λ² + h/(2λ))``, which the tracking correction
    would take for a transient."""
    c, c0, c1 = hermite_lag(lam, h)
    np.copyto(out, W0)
    axpy(-beta * c, dS, out)
    axpy(-beta * c0, S0_dot, out)
    return axpy(-beta * c1, S1_dot, out)


def trapezoid_defects(x):
    """``(c₁, c₂)``: the exact time means of ``u`` and ``u²`` over a step (``u = e^{−λs}``,
    ``x = λh``) minus their trapezoidal rules, ``φ₁(x) − (1 + E)/2`` and
    ``φ₁(2x) − (1 + E²)/2`` (both ``−x²/12 + O(x³)`` and ``−x²/3 + O(x³)``)."""
    if x < 1e-3:
        return -x * x / 12.0 + x**3 / 24.0, -x * x / 3.0 + x**3 / 3.0
    E = math.exp(-x)
    return phi1(x) - 0.5 * (1.0 + E), phi1(2.0 * x) - 0.5 * (1.0 + E * E)


@dataclass(frozen=True)
class Tracking:
    """The transient's share of a step's means, to first order in ``W₀``.

    Attributes
    ----------
    c1 : float
        The mean of attention is the trapezoidal rule plus ``c₁ A₀ ∘ (W₀ − E_{A₀} W₀)``
        (:func:`tracking_shift`): a rate ``R`` gains ``c₁ Σ_i Cov_{A₀}(W₀_i, R_i)``
        (:meth:`mean_gain`).
    mean_D : float
        What the time mean of the dissipation rate adds to its trapezoidal rule.
    A0, W0c : ndarray
        The weights and the row-centred transient (read by :meth:`mean_gain`).
    """

    c1: float
    mean_D: float
    A0: np.ndarray
    W0c: np.ndarray  # W₀ − E_{A₀} W₀, per row

    def mean_gain(self, R) -> float:
        """``⟨K, R⟩`` with ``K`` the correction of the mean of attention."""
        return self.c1 * float(np.vdot(self.A0, self.W0c * R))


def tracking_correction(A0, W0, dS, x, rate, ell, work):
    """The transient's share of a step while ``W₀`` is small (see the module docstring).

    The frozen relaxation's rate is ``(λ/β) Σ_i Var_{A₀}(L_i + u W₀_i) = a + b u + c u²``
    with ``b = 2(λ/β) ℓ Σ Cov(ΔŜ, W₀)`` and ``c = (λ/β) Σ Var(W₀)``; its exact mean minus
    its trapezoidal rule is ``b c₁ + c c₂``. Its attention is ``A₀ ∘ (1 + (u − 1)(W₀ −
    E W₀))`` to first order, whose mean minus trapezoidal rule is ``c₁ A₀ ∘ (W₀ − E W₀)``.

    Parameters
    ----------
    A0, W0, dS : ndarray, shape (N, N)
        Attention at the start, the transient ``W₀`` and ``ΔŜ = Ŝ₁ − Ŝ₀``.
    x, rate, ell : float
        ``λh``, ``λ/β`` and ``ℓ = −β/(λh)``.
    work : Workspace
    """
    c1, c2 = trapezoid_defects(x)
    W0c = np.subtract(W0, np.vecdot(A0, W0)[:, None], out=work.get("tr.W0c", W0.shape))
    prod = np.multiply(W0c, dS, out=work.get("tr.prod", W0.shape))
    cov = float(np.vdot(A0, prod))  # Σ_i Cov_{A₀}(W₀_i, ΔŜ_i)
    np.multiply(W0c, W0c, out=prod)
    var = float(np.vdot(A0, prod))  # Σ_i Var_{A₀}(W₀_i)
    return Tracking(c1=c1, mean_D=rate * (2.0 * ell * cov * c1 + var * c2), A0=A0, W0c=W0c)


def tracking_shift(A0, W0, x, out):
    """``K = c₁ A₀ ∘ (W₀ − E_{A₀} W₀)`` into ``out``, shape (N, N): what a step's mean
    attention adds to the trapezoidal rule ``(A₀ + A₁)/2`` to first order in a small
    transient ``W₀`` (``x = λh``; without the rest of :func:`tracking_correction`)."""
    c1 = trapezoid_defects(x)[0]
    K = np.subtract(W0, np.vecdot(A0, W0)[:, None], out=out)
    K *= A0
    K *= c1
    return K


#: Gauss–Legendre nodes and weights on [0, 1] (three points: exact for degree 5).
_GAUSS_U = (0.5 - 0.5 * math.sqrt(0.6), 0.5, 0.5 + 0.5 * math.sqrt(0.6))
_GAUSS_W = (5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0)


def transient_mean(Z0, S0, S1, A0, A1, W0, beta, lam, h, work, prefix):
    """The mean attention ``Ā`` of a step with a fast transient (see the module docstring),
    and the attention ``A_half`` of the step's path at its middle.

    With ``σ = s/h``, attention along the step is ``g(σ, u) = softmax(T + σV + uW₀)``,
    ``T = βŜ₀ + L`` the frozen lagged target, ``V = βΔŜ``, ``u = e^{−xσ}``, ``x = λh``.
    Simpson's rule in ``σ`` on the step's own path (``A₀``, ``A_half``, ``A₁``) integrates its
    slow part; what it misses of the transient is taken from

    * the frozen relaxation ``g(0, u)``: its exact mean is ``A_T + (1/x)∫_E^1 q du`` with
      ``A_T = softmax(T)`` and ``q = (g(0, u) − A_T)/u``, smooth on [0, 1] (composite
      three-point Gauss–Legendre in ``u``, panels as :func:`~dynamics.relaxation.
      simpson_panels`);
    * its response to the score motion, to first order in ``V``: ``σ (J(u) − J(0))`` with
      ``J(u) = g ∘ (V − E_g V)`` at ``g = g(0, u)``, whose mean is
      ``(1/x²)∫_E^1 ln(1/u) p du``, ``p = (J(u) − J(0))/u`` smooth (the same nodes, with
      weights exact for ``ln(1/u)`` times a quadratic).

    Simpson's rule on the frozen relaxation and on its response is subtracted: what
    remains is the share of the transient that the rule on the step's path misses.

    Parameters
    ----------
    Z0, S0, S1, A0, A1 : ndarray, shape (N, N)
        Logits at the start, effective scores at both ends, attention at both ends.
    W0 : ndarray, shape (N, N)
        :func:`lagged_start` of the step (``Z₀ = T + W₀`` up to row constants).
    beta, lam, h : float
    work : Workspace
    prefix : str
        Names of this caller's scratch arrays in ``work``.
    """
    shape = Z0.shape
    x = lam * h
    E, e_half = math.exp(-x), math.exp(-0.5 * x)
    target = np.subtract(S1, S0, out=work.get(prefix + ".target", shape))
    V = target * beta
    target *= -beta / (lam * h)  # the lag L …
    axpy(beta, S0, target)  # … plus βŜ₀

    def frozen(u):
        return en.rowsoftmax(axpy(u, W0, target.copy()))

    A_T = en.rowsoftmax(target)
    A_fm, A_fe = frozen(e_half), frozen(E)
    A_half = en.rowsoftmax(logit_step(Z0, S0, 0.5 * (S0 + S1), beta, lam, 0.5 * h),
                           centred=True)
    # the frozen relaxation's mean, and the first-order response of the transient to the
    # score motion, by composite Gauss–Legendre in u
    J0 = _response(A_T, V)
    spread = (1.0 - E) * float(max_reduce(en.oscillation(W0), None))
    edges = np.linspace(E, 1.0, simpson_panels(spread) + 1)
    frozen_q, response_p = np.zeros(shape), np.zeros(shape)
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        u = [a + (b - a) * g for g in _GAUSS_U]
        log_weights = _log_weights(a, b, u)
        for uk, gw, lw in zip(u, _GAUSS_W, log_weights, strict=True):
            Ak = frozen(uk)
            Ak -= A_T
            frozen_q += ((b - a) * gw / uk) * Ak  # ∫ q du, q = (g(0, u) − A_T)/u
            Ak += A_T
            response_p += (lw / uk) * (_response(Ak, V) - J0)  # ∫ ln(1/u) p du
    mean = (A0 + 4.0 * A_half + A1) / 6.0
    mean += frozen_q / x
    mean -= (A0 + 4.0 * A_fm + A_fe - 6.0 * A_T) / 6.0
    mean += response_p / (x * x)
    mean -= (2.0 * _response(A_fm, V) + _response(A_fe, V) - 3.0 * J0) / 6.0
    return mean, A_half


def _log_weights(a, b, u):
    """Weights ``ω_k`` with ``Σ ω_k p(u_k) = ∫_a^b ln(1/u) p(u) du`` for quadratic ``p``."""
    def antiderivative(v, m):  # of u^m ln(1/u), 0 at u = 0
        return v ** (m + 1) * (math.log(1.0 / v) + 1.0 / (m + 1)) / (m + 1) if v > 0 else 0.0

    moments = [antiderivative(b, m) - antiderivative(a, m) for m in range(3)]
    return np.linalg.solve(np.vander(u, 3, increasing=True).T, moments)


def _response(A, V):
    """``A ∘ (V − E_A V)``: the first-order change of ``rowsoftmax`` at attention ``A``
    when its logits move by ``V``."""
    return A * (V - np.vecdot(A, V)[:, None])


def path_dissipation(Z0, S0, A0, Z1, S1, A1, A_mean, beta):
    """``∫D`` over a step whose logits follow ``dZ/ds = −λ(Z − βŜ(s))`` with ``Ŝ`` linear in
    time, from its mean attention ``Ā``: ``F(A₀; Ŝ₀) − F(A₁; Ŝ₁) − ⟨Ā, ΔŜ⟩`` (the free
    energy balance of the Theory page along the step's path, exact for any ``λh``), as
    ``⟨A₁ − Ā, Ŝ₁⟩ + ⟨Ā − A₀, Ŝ₀⟩ − (1/β) Σ (A₁ log A₁ − A₀ log A₀)`` (no row constant of
    ``Ŝ`` enters)."""
    neg_entropy = (float(np.vdot(A1, en.log_rowsoftmax(Z1)))
                   - float(np.vdot(A0, en.log_rowsoftmax(Z0))))
    return (float(np.vdot(A1 - A_mean, S1)) + float(np.vdot(A_mean - A0, S0))
            - neg_entropy / beta)


def neg_entropy(A, Z):
    """``Σ A log A`` of ``A = rowsoftmax(Z)`` for logits with row maxima 0 (as the steppers
    keep them), without a logarithm per entry: row ``i``'s log-normaliser is
    ``−log max_j A_ij``."""
    return float(np.vdot(A, Z)) + float(np.log(max_reduce(A, 1)).sum())


def trapezoid_path_dissipation(S0, A0, n0, S1, A1, n1, beta):
    """:func:`path_dissipation` with the trapezoidal mean ``Ā = (A₀ + A₁)/2``, from the
    ``n = Σ A log A`` at both ends (:func:`neg_entropy`):
    ``⟨A₁ − A₀, Ŝ₀ + Ŝ₁⟩/2 − (n₁ − n₀)/β`` (value matching's steps below the stiff branch,
    :meth:`~.etd_verlet.EtdVerlet.verlet`)."""
    return (0.5 * (float(np.vdot(A1, S0)) + float(np.vdot(A1, S1))
                   - float(np.vdot(A0, S0)) - float(np.vdot(A0, S1)))
            - (n1 - n0) / beta)
