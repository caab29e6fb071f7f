"""Independent tight references for the stiff-regime accuracy tests (issue #12): the
logit form on ``solve_ivp`` with ``∫D``, ``∫−⟨A, dS/dt⟩`` and the tracking bound carried as
extra states, the feature paths from their closed forms written here again (Theory page,
Part I). Imported by ``test_stiff_accuracy.py`` and ``test_stiff_findings.py``."""


import functools
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynamics import Settings, Simulation, models
from dynamics import energy as en

DT = 0.01
LAM_H = (1.0, 10.0, 100.0)
T_END = 1.0
#: Steps of the measured orders (γ fixed: λh falls with dt), fitted on the last three:
#: from dt = 0.01 to 0.005 a first step off the lagged path (A(0) = A*: W₀ = βΔS/(λh)) still
#: weighs (oscillation λh = 10, dissipated: local orders 1.63, 1.81, 2.04, 1.98 down to
#: dt = 0.000625).
DTS = (0.01, 0.005, 0.0025, 0.00125)
ORDER_DTS = DTS[1:]
#: Relative accuracy asked of every diagnostic at dt = 0.01.
RTOL = 1e-3
#: Relative errors at dt = 0.01 below this carry no asserted order (it is printed): the
#: references' own accuracy (rtol 1e-10; the static and switch paths, which the exact step
#: solves exactly, measure 1e-16 … 1.5e-9 with no trend; on the attention model H, whose
#: stiff steps take the logits exactly for scores cubic in time, measures 1e-16 … 5e-12 on
#: the moving paths: a linear logit step lagged by O(dt S̈/λ) and put H at 2e-9 … 5e-12,
#: order 1, and ∫D of the drift path at λh = 10 at order 1.26).
NOISE_FLOOR = 1e-8
#: The diagnostics checked.
CHECKED = ("work", "dissipated", "hamiltonian", "kl_bound")


# --- independent references -----------------------------------------------------------
def _softmax(Z):
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _variance(A, W):
    """Σ_i Var_{A_i}(W_i)."""
    Wc = W - np.sum(A * W, axis=1, keepdims=True)
    return float(np.sum(A * Wc * Wc))


def _osc(V):
    return V.max(axis=1) - V.min(axis=1)


def _free_energy(Z, S, beta):
    A = _softmax(Z)
    log_a = Z - Z.max(axis=1, keepdims=True)
    log_a = log_a - np.log(np.exp(log_a).sum(axis=1, keepdims=True))
    return float(-np.sum(A * S) + np.sum(A * log_a) / beta)


def path_terms(path):
    """The feature path of the Theory page as ``X(t) = Σ_k f_k(t) B_k`` with the scalar
    functions ``f_k`` and their derivatives: ``(B, f, f_dot)``, written from the closed
    forms (not the package's evaluation)."""
    X0, Y, Q, w, a, mu = path.X0, path.Y, path.Q, path.omega, path.amplitude, path.settle_rate
    kind = path.kind
    if kind == "static" or kind == "switch":
        return [X0], (lambda t: (1.0,)), (lambda t: (0.0,))
    if kind == "rotation":  # rotate by ωt in the planes (q1, q2), (q3, q4), … of Q
        C = X0 @ Q
        pairs = Q.shape[0] // 2
        U = np.zeros_like(C)
        U[:, :2 * pairs] = C[:, :2 * pairs]
        J = np.zeros_like(C)  # (u, v) → (−v, u)
        J[:, 0:2 * pairs:2] = -C[:, 1:2 * pairs:2]
        J[:, 1:2 * pairs:2] = C[:, 0:2 * pairs:2]
        return ([X0, U @ Q.T, J @ Q.T],
                lambda t: (1.0, math.cos(w * t) - 1.0, math.sin(w * t)),
                lambda t: (0.0, -w * math.sin(w * t), w * math.cos(w * t)))
    if kind == "oscillation":
        return ([X0, Y], lambda t: (1.0, a * math.sin(w * t)),
                lambda t: (0.0, a * w * math.cos(w * t)))
    if kind == "drift":
        return [X0, Y], lambda t: (1.0, a * t), lambda t: (0.0, a)
    if kind == "converging":
        return ([X0, Y], lambda t: (1.0, a * (1.0 - math.exp(-mu * t))),
                lambda t: (0.0, a * mu * math.exp(-mu * t)))
    raise ValueError(kind)


def attention_reference(settings, T):
    """Attention model at ``T``: ``y = [Z, ∫D, ∫−⟨A, dS/dt⟩, B]``, the switch path's jump
    applied between two solves (its work with attention frozen, ``B`` jumps by
    ``β osc(ΔS)``)."""
    sim = Simulation(settings)
    prob, st = sim.problem, sim.state
    path, M = prob.path, prob.M
    beta, gamma, lam = prob.beta, prob.gamma, prob.relaxation_rate
    N = st.Z.shape[0]
    nz = N * N
    terms, f, f_dot = path_terms(path)

    def products(terms):
        """``B_k M B_lᵀ`` for every pair, rows (k, l): ``S = Σ f_k f_l B_k M B_lᵀ``."""
        terms = np.array(terms)
        return np.einsum("kia,ab,ljb->klij", terms, M, terms).reshape(len(terms) ** 2, -1)

    G = products(terms)

    def rhs(t, y):
        c, c_dot = np.array(f(t)), np.array(f_dot(t))
        S = (np.outer(c, c).ravel() @ G).reshape(N, N)
        S_dot = ((np.outer(c_dot, c) + np.outer(c, c_dot)).ravel() @ G).reshape(N, N)
        Z = y[:nz].reshape(N, N)
        A = _softmax(Z)
        D = lam / beta * _variance(A, Z - beta * S)
        return np.concatenate([(gamma * S - lam * Z).ravel(), [D, -np.sum(A * S_dot)],
                               -lam * y[nz + 2:] + beta * _osc(S_dot)])

    def jac(t, y):  # the linear part; the integrals feed back into nothing
        diag = np.full(y.size, -lam)
        diag[nz:nz + 2] = 0.0
        return np.diag(diag)

    W0 = st.Z - beta * st.S
    y = np.concatenate([st.Z.ravel(), [0.0, 0.0], _osc(W0)])
    cuts = [0.0] + [ts for ts in path.jumps if 0.0 < ts < T] + [T]
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        y = _solve(rhs, (a, b), y, lam, jac)
        if b < T:  # the switch: X jumps from X0 to X0 + δY
            X_old, X_new = path.X0, path.X0 + path.amplitude * path.Y
            dS = X_new @ M @ X_new.T - X_old @ M @ X_old.T
            y[nz + 1] -= float(np.sum(_softmax(y[:nz].reshape(N, N)) * dS))
            y[nz + 2:] += beta * _osc(dS)
            terms = [X_new]
            G = products(terms)
    Z = y[:nz].reshape(N, N)
    c = np.array(f(T))
    S = (np.outer(c, c).ravel() @ G).reshape(N, N)
    return {"A": _softmax(Z), "dissipated": y[nz], "work": y[nz + 1],
            "hamiltonian": _free_energy(Z, S, beta),
            "kl_bound": float(np.sum(y[nz + 2:] ** 2) / 8.0)}


def coupled_reference(settings, T):
    """A coupled model at ``T`` from its readable field (velocity, force, effective
    scores, H): ``y = [X, P, Z, ∫D, B]`` (``B`` for the canonical model only)."""
    return coupled_references(settings, (T,))[-1]


def coupled_references(settings, times):
    """:func:`coupled_reference` at each of ``times`` (increasing, the last the end), from
    one solve."""
    sim = Simulation(settings)
    prob, st = sim.problem, sim.state
    readable = models.get(settings.model).readable
    velocity, force = readable["velocity"], readable["force"]
    effective, hamiltonian = readable["effective_scores"], readable["hamiltonian"]
    beta, lam, M = prob.beta, prob.relaxation_rate, prob.M
    tracked = settings.model == "canonical"
    N, d = st.X.shape
    nx, nz = N * d, N * N

    def unpack(y):
        return (y[:nx].reshape(N, d), y[nx:2 * nx].reshape(N, d),
                y[2 * nx:2 * nx + nz].reshape(N, N))

    def rhs(t, y):
        X, P, Z = unpack(y)
        A = _softmax(Z)
        W = Z - beta * effective(prob, X, P, A)
        X_dot = velocity(prob, X, P, A)
        parts = [X_dot.ravel(), force(prob, X, P, A).ravel(), (-lam * W).ravel(),
                 [lam / beta * _variance(A, W)]]
        if tracked:
            S_dot = X_dot @ M @ X.T + X @ M @ X_dot.T
            parts.append(-lam * y[2 * nx + nz + 1:] + beta * _osc(S_dot))
        return np.concatenate(parts)

    y0 = [st.X.ravel(), st.P.ravel(), st.Z.ravel(), [0.0]]
    if tracked:
        y0.append(_osc(st.Z - beta * en.scores(st.X, M)))
    out = []
    for y in _solve(rhs, (0.0, times[-1]), np.concatenate(y0), lam, None, times).T:
        X, P, Z = unpack(y)
        A = _softmax(Z)
        values = {"X": X, "A": A, "dissipated": y[2 * nx + nz], "work": 0.0,
                  "hamiltonian": hamiltonian(prob, X, P, A, en.log_rowsoftmax(Z))}
        if tracked:
            values["kl_bound"] = float(np.sum(y[2 * nx + nz + 1:] ** 2) / 8.0)
        out.append(values)
    return out


def _solve(rhs, span, y0, lam, jac, times=None):
    """DOP853 at rtol 1e-10; Radau (same tolerances; ``jac`` the Jacobian, or None: finite
    differences) when the relaxation is stiff. The solution at the end, or at each of
    ``times`` (columns)."""
    kw = {} if times is None else {"t_eval": times}
    if lam * (span[1] - span[0]) > 500.0:
        sol = solve_ivp(rhs, span, y0, method="Radau", rtol=1e-10, atol=1e-12,
                        **({} if jac is None else {"jac": jac}), **kw)
    else:
        sol = solve_ivp(rhs, span, y0, method="DOP853", rtol=1e-10, atol=1e-12, **kw)
    assert sol.success, sol.message
    return sol.y[:, -1].copy() if times is None else sol.y


@functools.cache
def reference(model, lam_h, T=T_END, **values):
    """The reference diagnostics of a case (cached: several tests share them)."""
    s = case_settings(model, lam_h, **values)
    return (attention_reference if model == "attention" else coupled_reference)(s, T)


def case_settings(model, lam_h, **values):
    """N = 5, d = 3, β = 1 unless given; γ = β λh / dt at dt = 0.01."""
    values = {"n_tokens": 5, "dim": 3, "beta": 1.0, "seed": 3, **values}
    values["gamma"] = values["beta"] * lam_h / DT
    if model != "attention":
        values.setdefault("init_momentum", "random")
    values.setdefault("init_attention", "softmax")
    return Settings(model=model, **values)


def run(settings, T, dt):
    """The Simulation's frame at ``T`` with step ``dt`` (not stopped where its balance
    misses by over 1 %: coarse steps are measured against the reference on purpose)."""
    sim = Simulation(settings.copy(dt=dt))
    sim.law = None
    sim.advance(int(round(T / dt)))
    assert sim.status == "running", sim.message
    assert sim.t == pytest.approx(T, abs=1e-9)
    return sim.frame()


def short_values(values):
    return "[" + ", ".join(f"{v:.2e}" for v in values) + "]"


def relative_errors(frame, ref, keys=CHECKED):
    """``|value − reference| / max(|reference|, 1e-12)`` per diagnostic (NaN: n/a)."""
    out = {}
    for key in keys:
        value = frame.diagnostics[key]
        if key in ref and math.isfinite(value):
            out[key] = abs(value - ref[key]) / max(abs(ref[key]), 1e-12)
    return out


ATTENTION_CASES = {
    "static": {"init_attention": "random"},
    "rotation": {"omega": 2.0},
    "oscillation": {"omega": 3.0, "amplitude": 0.8},
    "drift": {"amplitude": 0.8},
    "switch": {"init_attention": "random", "switch_time": 0.5, "amplitude": 1.0},
    "converging": {"init_attention": "random", "settle_rate": 2.0, "amplitude": 1.0},
}
COUPLED_CASES = {"canonical": {}, "value_matching": {"kappa": 1.0}, "cotangent_lift": {}}
