"""Relaxations of the logits with frozen scores: stiff safety, the exact path, the
blocked sweep of the cotangent lift and its quadrature order (Theory page: "Logits")."""

import numpy as np
import pytest
from helpers import fitted_order

from dynamics import Settings, relaxation, simulate
from dynamics import energy as en
from dynamics.logits import logit_step
from dynamics.relaxation import (
    relax,
    relax_chain,
    relax_to_target,
    relaxation_averages,
)
from dynamics.workspace import Workspace


# --- Part III: stiff safety ---------------------------------------------------------
@pytest.mark.parametrize("lam_h", [1.0, 10.0, 50.0, 100.0])
def test_stiff_step_lands_on_frozen_equilibrium_without_overshoot(lam_h):
    """For frozen scores the log-odds shrink exactly by e^{-λh}: no overshoot past βS."""
    rng = np.random.default_rng(7)
    N, beta, h = 6, 3.0, 0.1
    lam = lam_h / h
    S = rng.standard_normal((N, N))
    Z = 4.0 * rng.standard_normal((N, N))
    W0 = Z - beta * S
    E = np.exp(-lam_h)
    for Z1 in (logit_step(Z, S, S, beta, lam, h), relax(Z, S, beta, lam, h)[0]):
        A1 = en.rowsoftmax(Z1)
        assert np.all(A1 > 0.0) and np.max(np.abs(A1.sum(axis=1) - 1)) <= 1e-12
        # Z1 − βS − E·W0 is a row constant: the relaxation is exact, same sign as W0
        resid = (Z1 - beta * S) - E * W0
        assert np.all(en.oscillation(resid) <= 1e-13 * (1 + beta * np.abs(S).max()))
        assert np.all(en.oscillation(Z1 - beta * S) <= E * en.oscillation(W0) + 1e-13 * 30)
        if lam_h >= 50:
            np.testing.assert_allclose(A1, en.softmax_attention(S, beta), rtol=0, atol=1e-13)


def test_relax_dissipation_equals_free_energy_drop_at_any_stiffness():
    """For frozen scores ∫D = F(0) − F(h) exactly (no work): checks the Simpson rule in u."""
    rng = np.random.default_rng(3)
    N, beta = 5, 2.0
    S = rng.standard_normal((N, N))
    for lam_h in (1e-3, 0.5, 5.0, 50.0):
        Z = 3.0 * rng.standard_normal((N, N))
        Z1, A1, diss = relax(Z, S, beta, lam_h, 1.0)
        F0 = en.free_energy(en.rowsoftmax(Z), S, beta, en.log_rowsoftmax(Z))
        F1 = en.free_energy(A1, S, beta, en.log_rowsoftmax(Z1))
        assert diss >= 0.0
        assert diss == pytest.approx(F0 - F1, rel=2e-3, abs=1e-14)


def exact_mean_dissipation(Z, T, beta, lam, tau, pieces=16, nodes=32):
    """(1/τ) ∫₀^τ D ds along the exact frozen-target path ``Z(s) = T + e^{−λs}(Z − T)``,
    ``D = (λ/β) Σ_i Var_{A_i}(Z(s) − T)``, by composite Gauss–Legendre in ``u = e^{−λs}``
    (``ds = du/(λu)``; the integrand ``u Var_{A(u)}(W)`` is smooth on [0, 1])."""
    W, x = Z - T, lam * tau
    g, wg = np.polynomial.legendre.leggauss(nodes)
    total = 0.0
    edges = np.linspace(np.exp(-x), 1.0, pieces + 1)
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        for gk, wk in zip(g, wg, strict=True):
            u = 0.5 * (a + b + (b - a) * gk)
            A = en.rowsoftmax(T + u * W)
            m = (A * W).sum(axis=1)
            total += 0.5 * (b - a) * wk * u * float(((A * W * W).sum(axis=1) - m * m).sum())
    return lam / beta * total / x


def third_cumulant(A, W):
    """Σ_i κ₃ of the row ``W_i`` under the weights ``A_i`` (centred moments)."""
    C = W - (A * W).sum(axis=1, keepdims=True)
    return float((A * C**3).sum())


@pytest.mark.parametrize("N", [5, 300])  # 300: several row blocks of the sweep
def test_blocked_relaxation_follows_the_exact_path(N):
    """relax_to_target (row blocks, no max passes, panel count guessed from the previous
    call) gives the logits, attention and end rates of relaxation_averages; its mean
    dissipation (corrected trapezoid) is that of the exact path and ∫D is the free-energy
    drop; its K_end is the third cumulant, and a continuation given (D0, K0) is the same
    relaxation as one that computes them."""
    rng = np.random.default_rng(4)
    beta = 2.0
    S = rng.standard_normal((N, N))
    T = beta * S - (beta * S).max(axis=1, keepdims=True)  # the target βŜ with row maxima 0
    work = Workspace()
    for lam_h in (1e-3, 0.5, 5.0, 50.0, 0.5):  # panel counts change, then change back
        Z = 3.0 * rng.standard_normal((N, N))
        Z -= Z.max(axis=1, keepdims=True)
        A0 = en.rowsoftmax(Z)
        Z1, A1, D0, D1, mean_D, K1 = relax_to_target(Z, T, beta, lam_h, 1.0, A0, work=work)
        Zr, Ar, _, D0r, D1r, _ = relaxation_averages(Z, S, beta, lam_h, 1.0, A0, mean_A=False)
        np.testing.assert_allclose(Z1, Zr, rtol=0, atol=1e-12 * (1 + np.abs(Zr).max()))
        np.testing.assert_allclose(A1, Ar, rtol=1e-12, atol=1e-15)
        assert (D0, D1) == pytest.approx((D0r, D1r), rel=1e-9, abs=1e-13)
        # measured ≤ 1e-5 (N = 5) and 7e-8 (N = 300); Simpson on the same nodes: ≤ 1.4e-4
        assert mean_D == pytest.approx(exact_mean_dissipation(Z, T, beta, lam_h, 1.0),
                                       rel=1e-4, abs=1e-13)
        F0 = en.free_energy(A0, S, beta, en.log_rowsoftmax(Z))
        F1 = en.free_energy(A1, S, beta, en.log_rowsoftmax(Z1))
        assert mean_D * 1.0 == pytest.approx(F0 - F1, rel=2e-3, abs=1e-12 * N)
        assert K1 == pytest.approx(lam_h / beta * third_cumulant(A1, Z1 - T),
                                   rel=1e-9, abs=1e-13)
        # continuing towards the same target from the end, with its rates known
        given = relax_to_target(Z1, T, beta, lam_h, 0.3, A1, D0=D1, K0=K1, work=work)
        computed = relax_to_target(Z1, T, beta, lam_h, 0.3, A1, work=work)
        assert given[2:] == pytest.approx(computed[2:], rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("N", [5, 300])
def test_relaxation_chain_is_the_successive_relaxations(N):
    """relax_chain (one sweep for relaxations continuing towards the same target) gives
    what relax_to_target gives called once per relaxation, each from the last's end,
    with their rates passed on; panel counts differ between the relaxations."""
    rng = np.random.default_rng(6)
    beta = 1.5
    T = beta * rng.standard_normal((N, N))
    T -= T.max(axis=1, keepdims=True)
    Z = 3.0 * rng.standard_normal((N, N))
    Z -= Z.max(axis=1, keepdims=True)
    A = en.rowsoftmax(Z)
    for lam, taus in ((0.3, (0.5, 0.5)), (2.0, (1.0, 0.01, 3.0)), (40.0, (1.0, 1.0))):
        chain = relax_chain(Z, T, beta, lam, taus, A, work=Workspace())
        Zs, As, D0, K0, work = Z, A, None, None, Workspace()
        for got, tau in zip(chain, taus, strict=True):
            Zs, As, *rates, K0 = relax_to_target(Zs, T, beta, lam, tau, As, D0=D0, K0=K0,
                                                 work=work)
            D0 = rates[1]
            np.testing.assert_allclose(got[0], Zs, rtol=0, atol=1e-12 * (1 + np.abs(Zs).max()))
            np.testing.assert_allclose(got[1], As, rtol=1e-11, atol=1e-15)
            assert got[2:] == pytest.approx((*rates, K0), rel=1e-9, abs=1e-13)


def test_blocked_relaxation_quadrature_is_fourth_order(monkeypatch):
    """(measured order) the corrected trapezoid of relax_to_target converges as H⁴ in
    its panel width, on a stiff relaxation (λτ = 50) from a distant start; without its
    end correction, or with a wrong κ₃, it would be order 2."""
    rng = np.random.default_rng(4)
    N, beta, lam_tau = 5, 2.0, 50.0
    S = rng.standard_normal((N, N))
    T = beta * S - (beta * S).max(axis=1, keepdims=True)
    Z = 3.0 * rng.standard_normal((N, N))
    Z -= Z.max(axis=1, keepdims=True)
    A0 = en.rowsoftmax(Z)
    exact = exact_mean_dissipation(Z, T, beta, lam_tau, 1.0, pieces=64, nodes=64)
    panels, errors = (16, 32, 64), []
    for m in panels:
        monkeypatch.setattr(relaxation, "trapezoid_panels", lambda spread, m=m: m)
        mean_D = relax_to_target(Z, T, beta, lam_tau, 1.0, A0)[4]
        errors.append(abs(mean_D - exact) / exact)
    order = -fitted_order(panels, errors)
    print(f"relax_to_target quadrature: errors {errors}, order {order:.2f}")
    assert 3.7 <= order <= 4.3


def test_stiff_canonical_simulation_tracks_reduced_model():
    """γ = 1e4 (λh = 100): the canonical run stays on the simplex and follows the reduced one."""
    common = dict(n_tokens=5, dim=3, seed=5, beta=1.0, dt=0.01, init_momentum="random")
    stiff = simulate(Settings(model="canonical", gamma=1e4, init_attention="softmax",
                              **common), t_end=2.0, every=10)
    reduced = simulate(Settings(model="reduced", **common), t_end=2.0, every=10)
    assert stiff.status == "running"
    assert np.all(stiff.diagnostics["row_sum_error"] <= 1e-12)
    assert np.all(stiff.diagnostics["min_attention"] > 0)
    gap = np.abs(stiff.features - reduced.features).max()
    print(f"canonical γ=1e4 vs reduced, max feature gap over t∈[0,2]: {gap:.3e}")
    assert gap <= 1e-3 * np.abs(reduced.features).max()
    assert np.all(stiff.diagnostics["kl"] <= 1e-6)
