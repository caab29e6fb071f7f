"""The exponential branch of ``simulate(rtol)`` (stiff canonical runs,
``dynamics/solvers/exprk.py``).

The φ-functions against their integrals (``scipy.integrate.quad``), the coefficients
against the conditions that define them, the order of the fixed-step method against a
tight ``solve_ivp`` reference at λh from 0.1 to 100, and ``simulate(rtol)`` against the
independent reference of ``tests/stiff_reference.py`` (``∫D`` and the tracking bound as
extra states of the readable field).
"""

import functools
import math

import numpy as np
import pytest
from helpers import fitted_order
from scipy.integrate import quad, solve_ivp

from dynamics import Settings, Simulation, models, simulate
from dynamics.solvers.explicit import EXPLICIT_RATE, canonical_field
from dynamics.solvers.exprk import ExponentialStepper, ExpRK4, coefficients, exponential_suits, phis

Z_VALUES = (0.0, -1e-9, -1e-4, -0.3, -0.999, -1.0, -1.001, -7.5, -100.0, -1e4, 0.4, 2.0)


@pytest.mark.parametrize("z", Z_VALUES)
def test_phis_are_their_integrals(z):
    """``φ_k(z) = ∫₀¹ e^{(1−θ)z} θ^{k−1}/(k−1)! dθ`` on both sides of the switch from the
    series to the recurrence (|z| = 1)."""
    got = phis(z)
    for k in (1, 2, 3):
        want, _ = quad(lambda th, k=k: math.exp((1 - th) * z) * th ** (k - 1)
                       / math.factorial(k - 1), 0.0, 1.0, epsabs=0, epsrel=1e-13, limit=200)
        assert got[k - 1] == pytest.approx(want, rel=1e-12), (k, z)


@pytest.mark.parametrize("z", [0.0, -0.2, -3.0, -80.0])
def test_coefficients_meet_their_conditions(z):
    """Rows sum to ``c_i φ₁(c_i z)`` (the stages are exact for constant ``N``), the weights
    to ``φ₁``, ``Σ b c = φ₂``, ``Σ b c²/2 = φ₃`` for both the kept and the embedded weights;
    at ``z = 0`` the kept weights are (1/6, 0, 0, 1/6, 2/3)."""
    (E2, E1, a21, a31, a32, a41, a42, a51, a52, a54, b1, b4, b5, e) = coefficients(z)
    p1h = phis(z / 2)[0]
    p1, p2, p3 = phis(z)
    assert E2 == pytest.approx(math.exp(z / 2)) and E1 == pytest.approx(math.exp(z))
    assert a21 == pytest.approx(0.5 * p1h)
    assert a31 + a32 == pytest.approx(0.5 * p1h)
    assert a41 + 2 * a42 == pytest.approx(p1)
    assert a51 + 2 * a52 + a54 == pytest.approx(0.5 * p1h)
    c = np.array([0.0, 0.5, 0.5, 1.0, 0.5])
    for b in (np.array([b1, 0, 0, b4, b5]), np.array([b1, e, e, b4, b5 - 2 * e])):
        assert b.sum() == pytest.approx(p1, rel=1e-12)
        assert b @ c == pytest.approx(p2, rel=1e-12)
        assert b @ c**2 / 2 == pytest.approx(p3, rel=1e-12)
    if z == 0.0:
        np.testing.assert_allclose([b1, b4, b5], [1 / 6, 1 / 6, 2 / 3], rtol=1e-14)


def _phi(k, z):
    """``φ_k(z)`` by quadrature of its integral (independent of :func:`phis`)."""
    return quad(lambda th: math.exp((1 - th) * z) * th ** (k - 1) / math.factorial(k - 1),
                0.0, 1.0, epsabs=0, epsrel=1e-13, limit=200)[0]


@pytest.mark.parametrize("z", [-0.2, -3.0, -80.0])
def test_coefficients_are_the_published_table(z):
    """Every coefficient against Hochbruck & Ostermann's stiff-order-4 table (SIAM J.
    Numer. Anal. 43, 2005; EXPINT's ``hochost4``), written here from the table
    with ``φ_{j,i} = φ_j(c_i z)``, ``c = (0, ½, ½, 1, ½)`` and φ by quadrature. The row-sum
    conditions above hold by construction of ``a51``; this pins ``a52`` and ``a54``."""
    f = {(j, c): _phi(j, c * z) for j in (1, 2, 3) for c in (0.5, 1.0)}
    a52 = 0.5 * f[2, 0.5] - f[3, 1.0] + 0.25 * f[2, 1.0] - 0.5 * f[3, 0.5]
    a54 = 0.25 * f[2, 0.5] - a52
    table = [math.exp(z / 2), math.exp(z),
             0.5 * f[1, 0.5],                                   # a21
             0.5 * f[1, 0.5] - f[2, 0.5], f[2, 0.5],            # a31, a32
             f[1, 1.0] - 2 * f[2, 1.0], f[2, 1.0],              # a41, a42 (= a43)
             0.5 * f[1, 0.5] - 2 * a52 - a54, a52, a54,         # a51, a52 (= a53), a54
             f[1, 1.0] - 3 * f[2, 1.0] + 4 * f[3, 1.0],         # b1
             -f[2, 1.0] + 4 * f[3, 1.0], 4 * f[2, 1.0] - 8 * f[3, 1.0]]  # b4, b5
    # (the last entry, the error estimate's weight, is not in the table: tested above)
    np.testing.assert_allclose(coefficients(z)[:-1], table, rtol=1e-10, atol=1e-14)


def _relaxed_settings(lam):
    return Settings(model="canonical", n_tokens=5, dim=3, seed=3, gamma=lam,
                    init_momentum="random", init_attention="random")


@functools.cache
def _relaxed_reference(lam, t0, T):
    """The state at ``t0`` and the reference ``T`` later of :func:`_relaxed` (two Radau
    solves at rtol 1e-13, seconds at λ = 2000: computed once for the tests that share
    them), handed out as copies."""
    sim = Simulation(_relaxed_settings(lam))
    rhs, y0, _ = models.get("canonical").readable["reference"](sim.problem, sim.state)
    y0 = solve_ivp(rhs, (0, t0), y0, method="Radau", rtol=1e-13, atol=1e-14).y[:, -1]
    ref = solve_ivp(rhs, (0, T), y0, method="Radau", rtol=1e-13, atol=1e-14).y[:, -1]
    return y0, ref


def _relaxed(lam, t0=0.3, T=0.5):
    """A canonical problem (N = 5, d = 3, β = 1, random momenta and attention) and its
    state at ``t0`` (the relaxation layer of the start long gone), with a tight reference
    ``T`` later (Radau, rtol 1e-13) and the exponential solver's helpers."""
    sim = Simulation(_relaxed_settings(lam))
    prob = sim.problem
    y0, ref = (a.copy() for a in _relaxed_reference(lam, t0, T))
    helper = ExponentialStepper(prob, rtol=1.0, atol=1.0, t_end=T)
    helper.start_solver(sim.state)  # (its system's shape: N d = 15 features)
    return prob, y0, ref, helper


@pytest.mark.parametrize("lam, steps", [(20.0, (10, 20, 40, 80)), (2000.0, (10, 20, 40, 80))])
def test_fixed_steps_have_order_four_at_any_lambda_h(lam, steps):
    """Fixed steps over T = 0.5 (λh from 0.125 to 1, then from 12.5 to 100): the errors of
    X, P and Z fall like h⁴ (stiff order 4, the logits stepped as ``W = Z − βS``); the
    solver's ``∫D`` at least like h³."""
    T = 0.5
    prob, y0, ref, helper = _relaxed(lam, T=T)
    field = canonical_field(prob, 5, 3)
    stiff = np.zeros(y0.size, dtype=bool)
    stiff[30:55] = True
    hs, errors = [], {k: [] for k in "XPZD"}
    for n in steps:
        h = T / n
        solver = ExpRK4(field, 0.0, y0, T, rtol=1e6, atol=1e6, first_step=h, lam=lam,
                        stiff=stiff, shift=helper.scores, shift_rate=helper.score_rate)
        while solver.status == "running":
            solver.h = h
            solver.step()
        assert solver.t == T and solver.rejected == 0
        e = np.abs(solver.y - ref)
        hs.append(h)
        for k, part in zip("XPZD", (e[:15], e[15:30], e[30:55], e[55:]), strict=True):
            errors[k].append(float(part.max()))
    for k, errs in errors.items():
        measured = fitted_order(hs, errs)
        print(f"λ = {lam:g}, λh {lam * hs[0]:g}…{lam * hs[-1]:g}: {k} errors "
              f"{[f'{x:.2e}' for x in errs]}, order {measured:.2f}")
        if k == "D":  # the solver's own ∫D (not reported: simulate takes it from the
            assert measured > 2.9, k  # energy balance): 3.2 at λh 12.5…100
        else:
            assert measured == pytest.approx(4.0, abs=0.3), k


def test_the_logits_shift_matters_at_large_lambda_h():
    """Without the shift (``Z`` stepped with its forcing ``λβS``, of size λ) the same
    fixed steps lose orders at λh ≫ 1: the error at λh = 12.5 is far larger."""
    T, lam, n = 0.5, 2000.0, 80
    prob, y0, ref, helper = _relaxed(lam, T=T)
    field = canonical_field(prob, 5, 3)
    stiff = np.zeros(y0.size, dtype=bool)
    stiff[30:55] = True
    err = {}
    for shifted in (True, False):
        solver = ExpRK4(field, 0.0, y0, T, rtol=1e6, atol=1e6, first_step=T / n, lam=lam,
                        stiff=stiff, shift=helper.scores if shifted else None,
                        shift_rate=helper.score_rate)
        while solver.status == "running":
            solver.h = T / n
            solver.step()
        err[shifted] = float(np.max(np.abs(solver.y[:15] - ref[:15])))
    print(err)
    assert err[False] > 100 * err[True]


@pytest.mark.parametrize("gamma, beta, init", [
    (100.0, 1.0, "softmax"), (1000.0, 1.0, "softmax"), (500.0, 2.0, "softmax"),
    (100.0, 1.0, "random"), (1000.0, 1.0, "random"), (500.0, 2.0, "random")])
def test_simulate_rtol_diagnostics_against_the_tight_reference(gamma, beta, init):
    """Stiff canonical runs (λ = 100, 1000, 250) on the exponential branch: features,
    dissipated energy, H and the tracking bound at t = 1 against the independent
    reference (readable field with ∫D and B as extra states; DOP853 or Radau, rtol 1e-10),
    random momenta. From a random attention (a relaxation layer of size O(1) at the start)
    the features' error is 20–50 times rtol (measured 1.8–4.8e-7 at rtol 1e-8; 1.2e-8 and
    1.7e-9 at rtol 1e-9 and 1e-10 for λ = 1000): the layer's error estimate is linear
    in the layer; from A = softmax(βS) it is below rtol."""
    from stiff_reference import coupled_reference

    s = Settings(model="canonical", n_tokens=5, dim=3, seed=3, gamma=gamma, beta=beta,
                 init_momentum="random", init_attention=init)
    ref = coupled_reference(s, 1.0)
    run = simulate(s, 1.0, every=1, rtol=1e-8)
    assert run.steps["method"] == "exponential RK4" and run.times[-1] == 1.0
    d = {k: v[-1] for k, v in run.diagnostics.items()}
    # ∫D is H(0) − H(t) on this branch: as accurate as H, measured at H's scale (from
    # A = softmax(βS) it is 3e-4 of H, so relative to itself it would be 3000 times less)
    scale = {"dissipated": max(abs(ref["dissipated"]), abs(ref["hamiltonian"]))}
    errors = {"X": float(np.max(np.abs(run.features[-1] - ref["X"]))),
              **{k: abs(d[k] - ref[k]) / scale.get(k, max(abs(ref[k]), 1e-12))
                 for k in ("dissipated", "hamiltonian", "kl_bound")}}
    print(gamma, beta, init, run.steps, errors)
    assert errors["X"] < (1e-7 if init == "softmax" else 1e-6)
    assert errors["dissipated"] < 1e-7 and errors["hamiltonian"] < 1e-7
    # and relative to ∫D itself, at the level the balance reaches (measured 3.3e-8 … 2.0e-6
    # over these six cases;
    # not rtol: a difference of two H's that are each accurate to rtol)
    own = abs(d["dissipated"] - ref["dissipated"]) / abs(ref["dissipated"])
    assert own < 1e-5
    assert errors["kl_bound"] < 1e-6
    assert d["work"] == 0.0
    # (+1e-14: KL(0) is a rounding error, 5e-16, when A(0) = softmax(βS))
    assert np.all(run.diagnostics["kl"] <= run.diagnostics["kl_bound"] * (1 + 1e-9) + 1e-14)


def test_simulate_rtol_meets_the_benchmark_target_at_rtol_1e_7():
    """The benchmark run (canonical, N = 8, d = 4, γ/β = 1000, t = 2) against DOP853 at
    rtol 1e-12 (stable at that tolerance, 7e-12 from Radau's): max|X − X_ref| ≤ 1e-6 at
    rtol 1e-7, and a tighter rtol gives a smaller error."""
    from dynamics.reference import solve_reference

    s = Settings(model="canonical", n_tokens=8, dim=4, gamma=1000.0, beta=1.0)
    sol, unpack = solve_reference(s, 2.0, method="DOP853", rtol=1e-12, atol=1e-13)
    X_ref = unpack(sol.y[:, -1])["X"]
    errors = {}
    for rtol in (1e-5, 1e-7):
        run = simulate(s, 2.0, every=10**9, rtol=rtol)
        errors[rtol] = float(np.max(np.abs(run.features[-1] - X_ref)))
        print(rtol, run.steps, errors[rtol])
    assert errors[1e-7] <= 1e-6
    assert errors[1e-7] < errors[1e-5] / 10


def test_branches_by_relaxation_rate():
    """Canonical single-head: DOP853 up to λ = EXPLICIT_RATE, exponential above; other
    models never take the exponential branch."""
    for gamma, method in ((EXPLICIT_RATE, "DOP853"), (EXPLICIT_RATE * 1.01, "exponential RK4"),
                          (1000.0, "exponential RK4")):
        s = Settings(model="canonical", n_tokens=4, dim=3, gamma=gamma)
        assert simulate(s, 0.05, every=10**6, rtol=1e-4).steps["method"] == method
    for model in ("value_matching", "cotangent_lift", "attention"):
        s = Settings(model=model, n_tokens=4, dim=3, gamma=1000.0)
        assert exponential_suits(Simulation(s).problem) is not None
        assert simulate(s, 0.05, rtol=1e-4).steps["method"] not in ("exponential RK4", "DOP853")


def test_exponential_branch_stops_a_diverging_run_where_it_crosses():
    s = Settings(model="canonical", n_tokens=6, dim=3, seed=5, confinement=0.0, beta=8.0,
                 gamma=800.0, norm_limit=20.0, init_momentum="random", dt=0.002)
    fixed = simulate(s, 6.0, every=100)
    assert fixed.status == "diverged", "the test needs a diverging run"
    run = simulate(s, 6.0, every=10, rtol=1e-6)
    assert run.steps["method"] == "exponential RK4"
    assert run.status == "diverged" and "exceeds 20" in run.message
    assert run.diverged_at == pytest.approx(fixed.diverged_at, abs=0.01)


@pytest.mark.parametrize("lam", [200.0, 2000.0])
def test_layer_term_estimates_the_error_of_a_step_into_the_layer(lam):
    """One step of λh = 20 from a state whose logits are off their slow manifold (random
    attention at t = 0): the layer term has the size and direction of the momenta's error
    against a tight reference, which the embedded estimate alone misses."""
    s = Settings(model="canonical", n_tokens=5, dim=3, seed=3, gamma=lam,
                 init_momentum="random", init_attention="random")
    sim = Simulation(s)
    prob = sim.problem
    rhs, y0, _ = models.get("canonical").readable["reference"](prob, sim.state)
    h = 20.0 / lam
    ref = solve_ivp(rhs, (0, h), y0, method="Radau", rtol=1e-13, atol=1e-14).y[:, -1]
    helper = ExponentialStepper(prob, rtol=1.0, atol=1.0, t_end=h)
    helper.start_solver(sim.state)  # (its system's shape: N d = 15 features)
    field = canonical_field(prob, 5, 3)
    stiff = np.zeros(y0.size, dtype=bool)
    stiff[30:55] = True
    solver = ExpRK4(field, 0.0, y0, h, rtol=1e6, atol=1e6, first_step=h, lam=lam,
                    stiff=stiff, shift=helper.scores, shift_rate=helper.score_rate)
    y1, diff = solver.attempt(0.0, y0, solver.f, h)
    _, g0 = solver.inner(y0, solver.f)
    layer = helper.layer_error(y0, g0, h)[15:30]
    actual = (y1 - ref)[15:30]
    embedded = diff[15:30]  # (this solver has no layer term)
    size = np.linalg.norm(layer) / np.linalg.norm(actual)
    cosine = float(layer @ actual) / (np.linalg.norm(layer) * np.linalg.norm(actual))
    print(f"λ = {lam:g}: |error| {np.linalg.norm(actual):.3g}, layer term / error {size:.2f},"
          f" cosine {cosine:.3f}, embedded / error "
          f"{np.linalg.norm(embedded) / np.linalg.norm(actual):.3f}")
    # first order in an O(1) layer: its size and direction, not its digits
    assert 0.5 < size < 2.0 and cosine > 0.8
    assert np.linalg.norm(embedded) < 0.3 * np.linalg.norm(actual)


@pytest.mark.slow  # ~10 s: two runs of a 9 × 385 head
def test_exponential_branch_on_a_real_head_keeps_its_constant_column():
    """A real head (N = 9, d = 385, its last feature column constant) at λ = 500: the
    column stays as it was, and rtol 1e-5 agrees with rtol 1e-9 to a few times 1e-5."""
    s = Settings(model="canonical", weights="minilm", gamma=500.0, init_momentum="random")
    loose = simulate(s, 0.5, every=10**9, rtol=1e-5)
    tight = simulate(s, 0.5, every=10**9, rtol=1e-9)
    assert loose.steps["method"] == tight.steps["method"] == "exponential RK4"
    assert np.array_equal(loose.features[-1][:, -1], loose.features[0][:, -1])
    difference = float(np.max(np.abs(loose.features[-1] - tight.features[-1])))
    print(loose.steps, tight.steps, difference)
    assert difference < 1e-4  # measured 2.8e-5
