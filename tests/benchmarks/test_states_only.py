"""``simulate(rtol, diagnostics=False)`` against a hand-written ``solve_ivp`` (issue #32, 4).

The baseline a user would write: the canonical model's right-hand side in logit form,
ten lines of NumPy (:func:`hand_field`), stepped by ``solve_ivp(method="DOP853")`` from
the run's own initial state (drawn once, outside the timing: the user has their arrays).
Canonical, N = 8, d = 4, t = 2, γ = β = 1 (non-stiff). Both sides walk an rtol ladder
(1e-2 … 1e-10, four per decade) to ``max|X − X_ref| ≤ 1e-4`` (and two rungs past it);
the passing rungs are timed side by side, interleaved, each side's figure its fastest.
The full ``simulate(rtol)`` (every diagnostic) is timed beside them. Figure
``t_hand / t_states``, target ≥ 1 (reported, not asserted).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynamics import Settings, Simulation, simulate

from .conftest import table_row
from .test_solve_ivp import T_END, _fastest, _reference, _walk

SETTINGS = Settings(model="canonical", n_tokens=8, dim=4, gamma=1.0, beta=1.0)
TARGET = 1e-4
RTOL_LADDER = tuple(10.0 ** (-2 - k / 4) for k in range(33))


def hand_field(M, beta, lam, mass, k, N, d):
    """``y = [X, P, Z]``: Ẋ = P/m, Ṗ = A X Mᵀ + Aᵀ X M − kX, Ż = −λ(Z − βXMXᵀ)."""
    nx = N * d

    def field(_t, y):
        X, Z = y[:nx].reshape(N, d), y[2 * nx:].reshape(N, N)
        A = np.exp(Z - Z.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        XM = X @ M
        F = A @ (X @ M.T) + A.T @ XM - k * X
        return np.concatenate([y[nx:2 * nx] / mass, F.ravel(),
                               (-lam * (Z - beta * (XM @ X.T))).ravel()])

    return field


def _hand_run(rtol: float, t_end: float):
    sim = Simulation(SETTINGS)
    p, st = sim.problem, sim.state
    N, d = st.X.shape
    field = hand_field(p.M, p.beta, p.relaxation_rate, p.mass, p.confinement, N, d)
    y0 = np.concatenate([st.X.ravel(), st.P.ravel(), st.Z.ravel()])

    def run():
        sol = solve_ivp(field, (0.0, t_end), y0, method="DOP853", rtol=rtol, atol=rtol / 100)
        assert sol.success, sol.message
        return sol.y[:N * d, -1].reshape(N, d)

    return run


def _simulate_run(rtol: float, t_end: float, diagnostics: bool):
    def run():
        traj = simulate(SETTINGS, t_end, every=10**9, rtol=rtol, diagnostics=diagnostics)
        assert traj.status == "running", traj.message
        return traj.features[-1]

    return run


def test_states_only_against_hand_written_solve_ivp(benchmark):
    benchmark.group = "simulate states only vs hand-written solve_ivp"
    if benchmark.disabled:  # one short run of every code path
        X_ref = _reference(SETTINGS, "non-stiff", 0.2, tight=False)
        for run in (_hand_run(1e-4, 0.2), _simulate_run(1e-4, 0.2, False)):
            assert np.max(np.abs(run() - X_ref)) < 1e-3
        benchmark.pedantic(_simulate_run(1e-4, 0.2, False), rounds=1, iterations=1)
        return
    X_ref = _reference(SETTINGS, "non-stiff", T_END)
    ladders = {
        "states only": [(f"rtol={r:.2g}", _simulate_run(r, T_END, False)) for r in RTOL_LADDER],
        "full simulate": [(f"rtol={r:.2g}", _simulate_run(r, T_END, True)) for r in RTOL_LADDER],
        "hand DOP853": [(f"rtol={r:.2g}", _hand_run(r, T_END)) for r in RTOL_LADDER],
    }
    passing = {name: _walk(ladder, X_ref, TARGET)[0] for name, ladder in ladders.items()}
    assert all(passing.values()), {k: bool(v) for k, v in passing.items()}
    fastest = _fastest(passing, rounds=15)
    t = {name: f[1] for name, f in fastest.items()}
    benchmark.pedantic(fastest["states only"][0][1], rounds=3, iterations=1)
    for name, ((config, _, error), seconds) in fastest.items():
        row = {"method": name, "config": config, "error": error, "t [ms]": 1e3 * seconds,
               "t_hand/t": t["hand DOP853"] / seconds,
               "target": ">= 1" if name == "states only" else "-"}
        table_row("states only vs hand-written solve_ivp(DOP853), max|X - X_ref| <= 1e-4", row)
        benchmark.extra_info[f"t_{name}"] = seconds


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
