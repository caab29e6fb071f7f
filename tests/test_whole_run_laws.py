"""Issue #36: every law holds for the whole run, or the run stops and says why.

* The cotangent lift's relaxations: a relaxation whose logits lie far below their row
  maxima, or that carries attention from one vertex to another, dissipates exactly what
  the KL to its target loses (the step had taken exponentials for logits, and a 64-panel
  rule for a jump it cannot resolve: ``∫D`` of 1e10 at N = 16, t = 16).
* The cotangent lift at N = 16 against a tight ``solve_ivp`` reference (DOP853, rtol
  1e-10; it agrees with rtol 1e-12 to 3e-10 in ``X`` up to t = 40).
* The engine's watch on the balance (:class:`dynamics.divergence.LawWatch`): a run whose
  residual exceeds 1e-2 of its energy scale stops, ``diverged``, on the last state where
  the law held, the same in ``simulate``, ``Simulation``, ``simulate_batch``, sweeps and
  on the page.
* Every shipped preset of the main tab (its quench applied, its comparison run too) to
  t = 40 and every lab preset to its own end: each law holds (to 1e-3 of the energy scale
  where the integrator gives that) or the run stops by the watch.
"""

import math

import numpy as np
import pytest
from helpers import assert_same_states, lab_preset_run
from scipy.special import log_softmax

from dynamics import Settings, Simulation, simulate, simulate_batch, sweep
from dynamics.divergence import LAW_TOLERANCE
from dynamics.reference import solve_reference
from dynamics.relaxation import (
    MAX_TRAPEZOID_PANELS,
    relax_chain,
    relax_to_target,
    target_divergence,
)

BALANCE = ("energy_residual", "dissipated", "work", "hamiltonian", "momentum_energy")


def law_fraction(diag) -> float:
    """``max_k |r_k| / scale_k`` over the frames, ``scale_k`` the run's energy scale so far:
    ``max(|E − E(0)|, |∫D|, |W|, |K − K(0)|, 1)`` up to frame ``k`` (``E − E(0) = r + W −
    ∫D``, ``K`` the momentum term of ``E``)."""
    r = np.asarray(diag["energy_residual"], dtype=float)
    D = np.asarray(diag.get("dissipated", np.zeros_like(r)), dtype=float)
    W = np.asarray(diag.get("work", np.zeros_like(r)), dtype=float)
    K = np.asarray(diag.get("momentum_energy", np.zeros_like(r)), dtype=float)
    K = np.zeros_like(r) if not np.all(np.isfinite(K)) else np.abs(K - K[0])
    scale = np.maximum.accumulate(np.maximum.reduce(
        [np.abs(r + W - D), np.abs(D), np.abs(W), K, np.ones_like(r)]))
    return float(np.max(np.abs(r) / scale))


def exact_drop(Z0, Z1, T, beta) -> float:
    """``∫D`` of a relaxation from ``Z0`` to ``Z1`` towards the frozen target ``T``: the
    drop of ``Σ_i KL(A_i ‖ softmax(T_i))``, divided by β (written out with SciPy)."""
    lt = log_softmax(T, axis=1)

    def kl(Z):
        la = log_softmax(Z, axis=1)
        return float(np.sum(np.exp(la) * (la - lt)))

    return (kl(Z0) - kl(Z1)) / beta


def dense_dissipation(Z, T, beta, lam, tau, n=20001) -> float:
    """``∫D`` along the exact path ``Z(s) = T + e^{−λs}(Z − T)`` by the trapezoid rule on
    ``n`` points."""
    s = np.linspace(0.0, tau, n)
    u = np.exp(-lam * s)[:, None, None]
    W = Z - T
    A = np.exp(log_softmax(T + u * W, axis=2))
    mean = np.sum(A * W, axis=2, keepdims=True)
    rates = lam / beta * u[:, 0, 0] ** 2 * np.sum(A * (W - mean) ** 2, axis=(1, 2))
    return float(np.trapezoid(rates, s))


# -- the relaxations -------------------------------------------------------------------
def test_rows_far_below_zero_dissipate_what_the_kl_loses():
    """Logits whose rows lie far below their maxima (the cotangent lift keeps them
    uncentred): every sample inside a relaxation underflows and is recomputed from its
    logits. The step had recomputed it from the exponentials (all zero), i.e. under
    uniform attention, and ∫D came out orders of magnitude too large."""
    rng = np.random.default_rng(3)
    N, beta, lam = 9, 1.0, 1.0
    T = 3.0 * rng.standard_normal((N, N))
    T -= T.max(axis=1, keepdims=True)
    Z = T + 4.0 * rng.standard_normal((N, N))
    Z -= Z.max(axis=1, keepdims=True) + 900.0  # row maxima at −900
    taus = (0.4, 0.4)
    results = relax_chain(Z, T, beta, lam, taus, np.exp(log_softmax(Z, axis=1)), centre=False)
    starts = [Z, results[0][0]]
    for tau, Z0, (Z1, A1, _, _, mean_D, _) in zip(taus, starts, results, strict=True):
        np.testing.assert_allclose(A1, np.exp(log_softmax(Z1, axis=1)), atol=1e-15)
        exact = exact_drop(Z0, Z1, T, beta)
        assert exact > 0.1
        assert tau * mean_D == pytest.approx(exact, rel=1e-5)


def test_a_relaxation_across_vertices_dissipates_the_kl_drop():
    """Attention carried from one vertex to another inside a step (logits 1e4 apart, the
    cotangent lift at N = 16 from t ≈ 9): more than the rule's panels can resolve, so the
    dissipation comes from the KL's drop, and it matches a dense quadrature of D."""
    N, beta, lam, tau, c = 4, 1.0, 1.0, 0.005, 1e4
    T, Z = np.full((N, N), -3 * c), np.full((N, N), -3 * c)
    for i, frac in enumerate((0.2, 0.5, 0.7, 0.9)):  # row i: its vertex changes there
        u_cross = np.exp(-lam * tau * frac)
        j, k = i, (i + 1) % N  # from column j to column k: W_j = c, W_k = −c
        T[i, k], T[i, j] = 0.0, -2.0 * u_cross * c
        Z[i, j], Z[i, k] = T[i, j] + c, T[i, k] - c
    Z -= Z.max(axis=1, keepdims=True)
    assert np.ptp(Z - T, axis=1).max() * lam * tau > 0.75 * MAX_TRAPEZOID_PANELS
    A0 = np.exp(log_softmax(Z, axis=1))
    Z1, _, _, _, mean_D, _ = relax_to_target(Z, T, beta, lam, tau, A0)
    dense = dense_dissipation(Z, T, beta, lam, tau)
    assert dense > 1e4  # the attention does move between vertices
    assert tau * mean_D == pytest.approx(dense, rel=1e-6)
    assert tau * mean_D == pytest.approx(exact_drop(Z, Z1, T, beta), rel=1e-12)
    assert target_divergence(Z1, log_softmax(T, axis=1)) < target_divergence(
        Z, log_softmax(T, axis=1))


# -- the cotangent lift at N = 16 ---------------------------------------------------
COTANGENT_16 = Settings(model="cotangent_lift", n_tokens=16)


@pytest.mark.slow
def test_cotangent_lift_at_16_tokens_follows_a_tight_reference():
    """H is linear in P, so not bounded below: attention collapses onto vertices (min A
    below 1e-19 by t = 4), jumps between them until t ≈ 13 while H falls from 8.65 to
    −1.258e5, then stays frozen (D < 1e-20) while ‖P‖ grows as e^{0.38 t}. The law holds
    throughout (it had read 1e10 from t = 16); the run follows DOP853 at rtol 1e-10
    (itself within 3e-10 of rtol 1e-12) to 1.2e-3 in X and 4e-3 of the energy scale in H
    and ∫D (t = 11, while attention jumps between vertices; 1.7e-3 from t = 13)."""
    t_end, every = 16.0, 100
    run = simulate(COTANGENT_16, t_end=t_end, every=every, diagnostics=BALANCE)
    assert run.status == "running" and run.times[-1] == pytest.approx(t_end)
    d = run.diagnostics
    assert law_fraction(d) < 1e-6
    ref, unpack = solve_reference(COTANGENT_16, t_end, rtol=1e-10, atol=1e-12,
                                  t_eval=run.times)
    assert ref.status == 0
    hamiltonian = Simulation(COTANGENT_16).spec.readable["hamiltonian"]
    prob = Simulation(COTANGENT_16).problem
    scale = np.maximum.accumulate(np.abs(d["hamiltonian"] - d["hamiltonian"][0]))
    for k in range(len(run.times)):
        y = unpack(ref.y[:, k])
        X = y["X"]
        assert np.linalg.norm(run.features[k] - X) <= 2.5e-3 * np.linalg.norm(X)
        log_a = log_softmax(y["Z"], axis=1)
        H = hamiltonian(prob, X, y["P"], np.exp(log_a), log_a)
        assert abs(d["hamiltonian"][k] - H) <= 5e-3 * max(scale[k], 1.0)  # 3.9e-3 at t = 11
        assert abs(d["dissipated"][k] - y["dissipated"]) <= 5e-3 * max(scale[k], 1.0)
    assert d["hamiltonian"][-1] < -1e5 and np.linalg.norm(run.momenta[-1]) > 1e4


# -- the watch -------------------------------------------------------------------------
#: A canonical run whose Verlet steps are too coarse for its light tokens (m = 0.1,
#: dt = 0.05): its balance misses by 1.15e-2 of its energy scale at t = 4.
COARSE = dict(model="canonical", mass=0.1, dt=0.05, init_momentum="random")


def assert_stopped_by_the_law(run_or_sim, diverged_at):
    assert run_or_sim.status == "diverged"
    assert run_or_sim.diverged_at == pytest.approx(diverged_at)
    message = run_or_sim.message
    assert message.startswith(f"diverged at t = {diverged_at:.4g}: the energy law")
    assert "smaller dt" in message and "rtol" in message


def test_a_run_that_breaks_its_law_stops_where_it_last_held():
    run = simulate(Settings(**COARSE), t_end=10.0, every=10, diagnostics=BALANCE)
    assert_stopped_by_the_law(run, 4.0)
    assert run.times[-1] == pytest.approx(3.5)  # the last state where the law held
    assert law_fraction(run.diagnostics) <= LAW_TOLERANCE
    assert "shown: t = 3.5" in run.message
    assert run.summary()["status"] == "diverged"


def test_streaming_stops_on_the_same_law_and_never_shows_it_broken():
    sim = Simulation(Settings(**COARSE))
    shown = [sim.frame().diagnostics]
    while sim.status == "running":
        shown.append(sim.step(10).diagnostics)
    assert_stopped_by_the_law(sim, 4.0)
    assert sim.t == pytest.approx(3.5) and sim.frame().t == pytest.approx(3.5)
    assert law_fraction({k: [f[k] for f in shown] for k in BALANCE}) <= LAW_TOLERANCE
    t = sim.t
    sim.step(5)
    assert sim.t == t


def test_a_batch_stops_each_run_as_simulate_does():
    fine = dict(COARSE, mass=1.0)
    settings = [Settings(**COARSE), Settings(**fine), Settings(**dict(COARSE, seed=3))]
    batch = simulate_batch(settings, t_end=5.0, every=10, diagnostics=BALANCE)
    for s, b in zip(settings, batch, strict=True):
        alone = simulate(s, t_end=5.0, every=10, diagnostics=BALANCE)
        assert_same_states(alone, b)
        assert (b.status, b.message, b.diverged_at) == (
            alone.status, alone.message, alone.diverged_at)
        for name in BALANCE:
            assert np.array_equal(alone.diagnostics[name], b.diagnostics[name])
    assert [b.status for b in batch] == ["diverged", "running", "diverged"]


def test_a_sweep_marks_the_points_whose_law_broke():
    ds = sweep(Settings(**COARSE), grid={"mass": [0.1, 1.0]}, t_end=5.0,
               metrics=["energy_residual_max", "diverged_at", "t_final"], where="local",
               cache=False)
    status = [str(s) for s in ds["status"].values]
    assert status == ["diverged", "completed"]
    assert "the energy law" in str(ds["message"].values[0])
    alone = simulate(Settings(**COARSE), t_end=5.0, every=int(ds.attrs["every"]),
                     diagnostics=BALANCE)
    assert alone.status == "diverged" and str(ds["message"].values[0]) == alone.message
    assert float(ds["diverged_at"].values[0]) == alone.diverged_at
    assert float(ds["t_final"].values[0]) == alone.times[-1] < alone.diverged_at
    assert law_fraction(alone.diagnostics) <= LAW_TOLERANCE
    assert float(ds["energy_residual_max"].values[0]) == np.max(
        np.abs(alone.diagnostics["energy_residual"]))
    assert math.isnan(float(ds["diverged_at"].values[1]))


@pytest.mark.slow
def test_the_page_says_which_law_broke():
    from dashboard_support import all_finite, play, sources

    from app import Dashboard

    d = Dashboard(settings=Settings(**COARSE), steps_per_frame=10, playing=True)
    play(d, 45)  # checked at every frame: it broke at t = 4 (1.15e-2 of the scale)
    assert d.sim.status == "diverged" and not d.playing
    assert "**diverged**" in d.status.object and "the energy law" in d.status.object
    assert all(all_finite(s) for s in sources(d))
    shown = [f.diagnostics for f in d.history]
    assert len(shown) > 2 and law_fraction({k: [f[k] for f in shown] for k in BALANCE}) \
        <= LAW_TOLERANCE
    residual = np.asarray(d.timeseries.source.data["residual"], dtype=float)
    assert np.max(np.abs(residual)) == pytest.approx(
        max(abs(f["energy_residual"]) for f in shown))


# -- every shipped preset and tour step, to t = 40 ----------------------------------
def _main_presets():
    from app import presets as presets_module

    return {p["name"]: p for p in presets_module.load_presets()}


def _lab_presets():
    from app.lab.inertial_lab import load_presets as load_lab_presets

    return {p["name"]: p for p in load_lab_presets()[0]}


def _tour():
    from app.teaching.tour import load_tour

    return load_tour()


T_LONG = 40.0
#: How each preset of the main tab ends by t = 40 (its quench applied), and the largest
#: share of its energy scale its balance may miss (measured, in the survey of the issue:
#: at most 9.9e-4, value matching near t = 1). The β quench at k = 2 < 2√N‖M‖₂ runs away
#: and stops where its features pass the norm limit (t = 24.7), its balance held (6e-5).
#: Tokens on the sphere keep no balance: E_β only grows.
OUTCOMES = {
    "β quench at t = 3": ("stops", LAW_TOLERANCE),
    "Clustering on the sphere": ("sphere", None),
    "Metastable clusters (large β)": ("sphere", None),
}


def run_preset(values, quench=None, t_end=T_LONG, frame_dt=0.5):
    """The run a preset shows, to ``t_end`` through :class:`Simulation` (its quench
    applied at its time, as the page applies it): its frames every ``frame_dt`` with the
    balance's diagnostics, and the simulation."""
    sim = Simulation(Settings(**values))
    dt = sim.settings.dt
    every, n = max(1, round(frame_dt / dt)), round(t_end / dt)
    at = None if quench is None else round(quench["at_t"] / dt)
    names = ("t", *BALANCE)
    frames, done = [sim.frame(names, arrays=False).diagnostics], 0
    while done < n and sim.status == "running":
        chunk = min(every, n - done) if at is None or at <= done else min(every, at - done)
        sim.advance(chunk)
        done += chunk
        if at == done:
            sim.settings.param.update(**{k: v for k, v in quench.items() if k != "at_t"})
            sim.sync()
        frames.append(sim.frame(names, arrays=False).diagnostics)
    return {k: np.array([f[k] for f in frames]) for k in frames[0]}, sim


def _preset_cases():
    """``(preset name, t_end)``: every preset to t = 40 or its own later end, and every
    tour step of the main tab to t = 40 or its own later end (once each)."""
    presets, cases = _main_presets(), {}
    for name, p in presets.items():
        cases[name] = max(T_LONG, float(p.get("t_end", 0.0)))
    for step in _tour()["steps"]:
        if "preset" in step:
            own = step.get("t_end", presets[step["preset"]].get("t_end", 0.0))
            cases[step["preset"]] = max(cases[step["preset"]], float(own))
    return sorted(cases.items())


@pytest.mark.slow
@pytest.mark.parametrize("name, t_end", _preset_cases())
def test_every_preset_keeps_its_law_for_the_whole_run(name, t_end):
    preset = _main_presets()[name]
    values = dict(preset["settings"])
    runs = [(values, preset.get("quench"))]
    if preset.get("compare"):  # the comparison run the page draws beside it
        runs.append(({**values, "model": "reduced"}, None))
    kind, tolerance = OUTCOMES.get(name, ("holds", 1e-3))
    for run_values, quench in runs:
        d, sim = run_preset(run_values, quench, t_end)
        if kind == "sphere":  # no balance; its energy E_β never falls
            assert sim.status == "running" and math.isnan(d["energy_residual"][-1])
            H = d["hamiltonian"]
            assert np.all(np.diff(H) >= -1e-9 * np.abs(H[1:]))
            continue
        assert law_fraction(d) <= tolerance
        if kind == "holds":
            assert sim.status == "running" and d["t"][-1] == pytest.approx(t_end)
        else:  # stopped (its tokens run away), on a state where the law held
            assert sim.status == "diverged" and 10.0 < sim.diverged_at < t_end
            assert d["t"][-1] <= sim.diverged_at


@pytest.mark.slow
def test_every_lab_preset_keeps_its_laws_to_its_own_end():
    """The lab's runs end where the lab ends them (the blow-up or its horizon): the
    accelerated moment system's H stays at H(0) without damping and only falls with it,
    as far as the lab draws it; the base case's balance H − H(0) + ∫α|ẋ|² stays at 0."""
    for name, preset in _lab_presets().items():
        settings = preset["settings"]
        if settings["model"] == "momentum_quadratic":
            for run in lab_preset_run(name).runs.values():
                f = run.suboptimality
                assert np.max(np.abs(run.energy_residual)) <= 1e-3 * max(1.0, float(np.ptp(f)))
            continue
        r = lab_preset_run(name)
        H = r.hamiltonian.y
        assert len(H) > 10, name
        scale = max(1.0, float(np.max(np.abs(H))))
        if settings.get("alpha", 1.0) == 0.0:
            assert np.max(np.abs(H - H[0])) <= 1e-3 * scale, name
        else:
            assert np.all(np.diff(H) <= 1e-9 * scale), name
