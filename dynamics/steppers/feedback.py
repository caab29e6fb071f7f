"""Value matching's attention feedback, solved implicitly over a step (Theory page:
"Value matching").

The effective scores ``Ŝ = G Xᵀ``, ``G = X M + κ (X − O) W_V``, depend on attention through
its output ``O = A Y``, ``Y = X W_Vᵀ`` (shape (N, d)). The exact logit step with ``Ŝ`` linear
in time ends at ``Z₁ = Q − bκ O₁ Y₁ᵀ`` where ``Q = E Z₀ + c₀ Ŝ₀ + b (X₁M + κ X₁W_V) X₁ᵀ``
holds everything else (``b = βψ(λh)``), and ``O₁ = rowsoftmax(Z₁) Y₁``: a fixed point in the
``d`` numbers of each row. It is the minimum of the strictly convex
``φ_i(o) = logsumexp(Q_i − bκ o Y₁ᵀ) + (bκ/2)|o|²``, found by Newton's method with the
Hessian ``I + bκ Cov_{A_i}(Y₁)`` (the covariance of the rows of ``Y₁`` under ``A_i``; each
iteration moves a row's logits by at most ``MAX_LOGIT_STEP``): the
feedback is then stable at any gain, where an explicit prediction needs
``γκ max(A)‖X W_Vᵀ‖² h`` small (sub-steps, whose fixed size left a plateau in the error).
"""

from __future__ import annotations

import numpy as np

from .. import energy as en
from ..logits import centre_rows
from .base import TooStiff

#: Newton iterations before giving up on a step.
MAX_NEWTON = 40
#: Largest change of a row's logits in one Newton iteration (a trust region: far from the
#: fixed point, at a large gain, the quadratic model of ``φ_i`` is poor).
MAX_LOGIT_STEP = 2.0
#: Converged when every ``|O − A Y|`` is below this times ``1 + max|O|``.
NEWTON_TOL = 1e-13


def solve_feedback(Q, Y, gain, O, work):
    """Newton's method for ``O = rowsoftmax(Q − gain·O Yᵀ) Y`` (see the module docstring).

    Parameters
    ----------
    Q : ndarray, shape (N, N)
        The logits without the feedback term.
    Y : ndarray, shape (N, d)
        ``X₁ W_Vᵀ``.
    gain : float
        ``bκ``.
    O : ndarray, shape (N, d)
        The starting guess (a prediction of ``A₁ Y₁``).
    work : Workspace

    Returns
    -------
    Z, A : ndarray, shape (N, N)
        The logits (row maxima 0) and attention at the fixed point.
    O : ndarray, shape (N, d)
        ``A Y``.
    """
    N, d = Y.shape
    YY = (Y[:, :, None] * Y[:, None, :]).reshape(N, d * d)  # rows y_j y_jᵀ
    eye = np.eye(d)
    Z = work.get("fb.Z", Q.shape)
    scale = 1.0 + float(np.abs(O).max())
    for _ in range(MAX_NEWTON):
        np.matmul(O, Y.T, out=Z)
        Z *= -gain
        Z += Q
        centre_rows(Z, out=Z)
        A = en.rowsoftmax(Z, centred=True, out=work.get("fb.A", Q.shape))
        AY = A @ Y
        F = AY - O
        if float(np.abs(F).max()) <= NEWTON_TOL * scale:
            return Z, A, AY
        C = (A @ YY).reshape(N, d, d) - AY[:, :, None] * AY[:, None, :]
        step = np.linalg.solve(eye + gain * C, F[:, :, None])[:, :, 0]
        moves = gain * np.abs(step @ Y.T).max(axis=1)  # the logits' change, per row
        O = O + step * np.minimum(1.0, MAX_LOGIT_STEP / np.maximum(moves, 1e-300))[:, None]
    raise TooStiff(f"value matching: the attention feedback (gain {gain:.3g}) did not "
                   f"converge in {MAX_NEWTON} Newton steps; lower dt, γ or κ")


def implicit_step(prob, Z0, S_hat0, X1, X1M, A_pred, coef, work, outs, rates=None):
    """Value matching's exact logit step with its feedback solved: ``Z₁``, ``A₁`` and
    ``Ŝ₁ = G₁ X₁ᵀ`` (in ``outs``, three arrays), from ``Z₀``, ``Ŝ₀``, ``X₁``, ``X₁M``, a
    prediction ``A_pred`` of ``A₁`` and ``coef = (E, c₀, b)`` of the step. With ``rates``
    (``β(b₀ dŜ/dt(t₀) + b₁ dŜ/dt(t₁))``), the step for ``Ŝ`` cubic in time
    (:func:`~dynamics.logits.hermite_logit_step`; then ``coef = (E, βa₀, βa₁)``)."""
    E, c0, b = coef
    Y1 = X1 @ prob.W_V.T
    C1 = X1M + prob.kappa * (X1 @ prob.W_V)
    Q = np.matmul(C1, X1.T, out=work.get("vm.Q", Z0.shape))
    Q *= b
    Q += E * Z0
    Q += c0 * S_hat0
    if rates is not None:
        Q += rates
    Z, A, O1 = solve_feedback(Q, Y1, b * prob.kappa, A_pred @ Y1, work)
    C1 -= prob.kappa * (O1 @ prob.W_V)  # G₁ = X₁M + κ (X₁ − O₁) W_V
    Z_out, A_out, S_out = outs
    np.copyto(Z_out, Z)
    np.copyto(A_out, A)
    return Z_out, A_out, np.matmul(C1, X1.T, out=S_out)


def feedback_work(W_V, X0, X1, A0, A1, A_mean):
    """What ``⟨Ā, ΔŜ⟩`` of a step's path misses of ``∫⟨A, dŜ/ds⟩`` along a fast transient
    of value matching, over κ: with ``Ŝ = C − κ O Yᵀ`` (``Y = X W_Vᵀ``, ``O = A Y``),
    ``∫⟨A, d(O Yᵀ)/ds⟩ = Δ|O|²/2 + ∫⟨O, A Ẏ⟩`` is path independent but for the slow
    ``Ẏ``, where the path (``Ŝ`` linear in time) gives ``⟨Ā, Δ(O Yᵀ)⟩``."""
    Y0, Y1 = X0 @ W_V.T, X1 @ W_V.T
    O0, O1 = A0 @ Y0, A1 @ Y1
    return (float(np.vdot(O1, A_mean @ Y1)) - float(np.vdot(O0, A_mean @ Y0))
            - 0.5 * (float(np.vdot(O1, O1)) - float(np.vdot(O0, O0)))
            - 0.5 * float(np.vdot(O0 + O1, A_mean @ (Y1 - Y0))))


def trapezoid_feedback_work(W_V, X0, X1, A0, A1):
    """:func:`feedback_work` with ``Ā = (A₀ + A₁)/2``:
    ``(⟨O₁, A₀Y₁⟩ − ⟨O₀, A₁Y₀⟩)/2 − ⟨O₀ + O₁, A₀Y₁ − A₁Y₀ + O₁ − O₀⟩/4``."""
    WT = W_V.T
    Y0, Y1 = X0 @ WT, X1 @ WT
    O0, O1, P01, P10 = A0 @ Y0, A1 @ Y1, A0 @ Y1, A1 @ Y0
    cross = float(np.vdot(O1, P01)) - float(np.vdot(O0, P10))
    P01 -= P10
    P01 += O1
    P01 -= O0
    O0 += O1
    return 0.5 * cross - 0.25 * float(np.vdot(O0, P01))
