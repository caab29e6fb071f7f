"""Stochastic logits (issue #19; Theory page: stochastic logits).

``dZ = (γŜ − λZ) dt + σ dW``: the engine adds ``σ √((1 − e^{−2λh})/(2λ)) ξ`` after each
step. Checked here:

* reproducibility: one seed gives one path bit for bit whatever the chunking, across a
  setting change that continues the run and across a reset; replicas differ; σ = 0 is
  the deterministic flow (``scripts/golden.py compare`` checks today's runs bit for bit);
* the oracles of the Theory page on ensembles, with tolerances from the ensemble size at
  99.9 % confidence (two-sided): the step is exact in law (the variance of the row-centred
  logit deviations is ``s²(1 − e^{−2λt})(1 − 1/N)`` at every t, a χ² statistic with
  ``K N (N − 1)`` degrees of freedom), the stationary variance ``s²(1 − 1/N)``, the
  small-noise mean KL ``½ s² Σ_i (1 − Σ_j A*_ij²)``, and the mean dissipation rate it
  implies, ``(λ/β) s² Σ_i (1 − Σ_j A*_ij²)`` (``D = (λ/β) Σ_i Var_{A_i}(W_i)``);
* what the diagnostics mean under noise: the energy jump of each noise increment is work
  (``noise_work`` its share), so ``energy_residual`` stays at integrator accuracy; the
  tracking bound grows by the noise's oscillation and still bounds the KL lag;
* models that do not relax attention do not read σ (the CLI refuses it for them).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from helpers import few_examples
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import stats

from dynamics import Settings, Simulation, models
from dynamics.cli import main
from dynamics.ensemble import run_ensemble
from dynamics.noise import NoiseClock, noise_scale, small_noise_kl, stationary_variance

#: The models that relax attention (they read ``logit_noise``).
RELAXING = ("attention", "canonical", "value_matching", "cotangent_lift")
#: Two-sided confidence of the statistical tests.
CONFIDENCE = 0.999
Z_QUANTILE = stats.norm.ppf(0.5 + CONFIDENCE / 2)  # 3.29


def _noisy(model, **values):
    return Settings(**{"model": model, "logit_noise": 0.4, "n_tokens": 5, "dim": 3,
                       "gamma": 2.0, **values})


def _fingerprint(sim):
    """Every array and number of the state and of its frame."""
    st, frame = sim.state, sim.frame()
    arrays = [st.X, st.P, st.Z, st.A, st.B, frame.attention, frame.softmax]
    numbers = [st.t, st.work, st.noise_work, st.dissipated, *frame.diagnostics.values()]
    return arrays, np.array(numbers)


def _assert_same(a, b):
    (arrays_a, numbers_a), (arrays_b, numbers_b) = a, b
    for x, y in zip(arrays_a, arrays_b, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(numbers_a, numbers_b, equal_nan=True)


def _run(settings, chunks, change=None, at=None, replica=0):
    """Steps in the given chunks; ``change`` applied after ``at`` steps."""
    sim, done = Simulation(settings, replica=replica), 0
    for n in chunks:
        if change is not None and done == at:
            settings.param.update(change)
        sim.step(n)
        done += n
    return sim


#: Stiff steps (λh = 0.8: the schemes' transient corrections, Strang's stiff branch).
STIFF = {"beta": 2.0, "gamma": 40.0, "dt": 0.04, "init_attention": "random",
         "init_momentum": "random"}


@pytest.mark.parametrize("stiff", [False, True], ids=["resolved", "stiff"])
@pytest.mark.parametrize("model", RELAXING)
def test_same_seed_same_path_whatever_the_chunking(model, stiff):
    extra, n = (STIFF, 40) if stiff else ({}, 100)
    ten = _run(_noisy(model, **extra), [10] * (n // 10))
    hundred = _run(_noisy(model, **extra), [n])
    uneven = _run(_noisy(model, **extra), [1, 36, n - 37])
    assert ten.status == "running"
    _assert_same(_fingerprint(ten), _fingerprint(hundred))
    _assert_same(_fingerprint(ten), _fingerprint(uneven))
    assert ten.noise_clock.step == n
    quiet = _run(_noisy(model, logit_noise=0.0, **extra), [n])
    assert not np.array_equal(quiet.state.Z, ten.state.Z)  # the noise is there


@pytest.mark.parametrize("model", RELAXING)
def test_a_continued_run_draws_what_it_would_have_drawn(model):
    """A change that continues the run (γ, σ and a quench of β) keeps the noise's clock:
    the same path whatever the chunking around it."""
    change = {"gamma": 3.0, "logit_noise": 0.6, "beta": 1.5}
    a = _run(_noisy(model), [10] * 10, change, at=50)
    b = _run(_noisy(model), [50, 50], change, at=50)
    c = _run(_noisy(model), [7, 43, 1, 49], change, at=50)
    assert [ch.values.keys() for ch in a.changes] == [change.keys()]
    _assert_same(_fingerprint(a), _fingerprint(b))
    _assert_same(_fingerprint(a), _fingerprint(c))
    assert a.noise_clock.step == 100 and a.logit_noise == 0.6


def test_a_reset_restarts_the_noise_and_replicas_differ():
    sim = _run(_noisy("canonical"), [40])
    sim.reset()
    sim.step(40)
    _assert_same(_fingerprint(sim), _fingerprint(_run(_noisy("canonical"), [40])))
    other = _run(_noisy("canonical"), [40], replica=1)
    assert np.array_equal(other.problem.M, sim.problem.M)  # the same initial data ...
    assert not np.array_equal(other.state.Z, sim.state.Z)  # ... and other noise
    with pytest.raises(ValueError, match="replica must be a non-negative integer"):
        Simulation(_noisy("canonical"), replica=-1)


@pytest.mark.parametrize("model", RELAXING)
def test_zero_noise_is_the_deterministic_flow(model):
    """σ = 0 draws nothing: any replica gives the same path, and no noise work."""
    a = _run(_noisy(model, logit_noise=0.0), [60])
    b = _run(_noisy(model, logit_noise=0.0), [25, 35], replica=7)
    _assert_same(_fingerprint(a), _fingerprint(b))
    assert a.state.noise_work == 0.0 and a.frame().diagnostics["noise_work"] == 0.0


def test_the_noise_increments():
    """``noise_scale`` is the standard deviation of ``∫₀ʰ e^{−λ(h−s)} σ dW``; increments are a
    pure function of (seed, replica, step), standard normal."""
    sigma, lam, h = 0.7, 2.0, 0.3
    assert noise_scale(sigma, lam, h) == pytest.approx(
        sigma * math.sqrt((1 - math.exp(-2 * lam * h)) / (2 * lam)), rel=1e-14)
    assert noise_scale(sigma, 1e-9, 1e-3) == pytest.approx(sigma * math.sqrt(1e-3), rel=1e-8)
    assert stationary_variance(sigma, lam) == pytest.approx(sigma**2 / (2 * lam))
    clock = NoiseClock.start(seed=3)
    later = clock.tick().tick()
    assert np.array_equal(later.increment((4, 4)), NoiseClock(clock.key, 2).increment((4, 4)))
    assert not np.array_equal(later.increment((4, 4)), clock.increment((4, 4)))
    assert NoiseClock.start(3, replica=1).key != clock.key
    xi = np.concatenate([NoiseClock(clock.key, n).increment(400) for n in range(50)])
    assert stats.kstest(xi, "norm").pvalue > 1 - CONFIDENCE


def _deviations(frames):
    """Row-centred logit deviations ``W = log A − log A*`` of each final frame, shape
    (K, N, N)."""
    W = np.stack([np.log(f.attention) - np.log(f.softmax) for f in frames])
    return W - W.mean(axis=-1, keepdims=True)


@pytest.mark.parametrize(("gamma", "t_end", "dt"), [(1.5, 1.0, 1.0), (1.5, 4.0, 1.0),
                                                     (8.0, 4.0, 1.0)],
                         ids=["one step", "four steps", "stationary"])
def test_the_step_is_exact_in_law(gamma, t_end, dt):
    """Static features from ``A(0) = A*``: ``W(t)`` is Gaussian with variance
    ``s²(1 − e^{−2λt})`` per entry, whatever the step (``λh`` = 0.75 and 4 here; a step
    that took σ²h as the variance would be 28 % off in one step). With ``K`` replicas,
    ``Σ (W_ij − W̄_i)² / v ~ χ²(K N (N − 1))``; at late times the mean square is the
    stationary ``s²(1 − 1/N)``."""
    K, N, beta, sigma = 150, 6, 2.0, 0.5
    lam = gamma / beta
    settings = Settings(model="attention", path="static", init_attention="softmax",
                        n_tokens=N, beta=beta, gamma=gamma, logit_noise=sigma, dt=dt, seed=4)
    ens = run_ensemble(settings, K, t_end, every=round(t_end / dt))
    W = _deviations(ens.final)
    v = stationary_variance(sigma, lam) * -math.expm1(-2 * lam * t_end)
    dof = K * N * (N - 1)
    q = float(np.sum(W * W)) / v
    lo, hi = stats.chi2.ppf([(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2], dof)
    assert lo <= q <= hi, (q / dof, lo / dof, hi / dof)
    mean_square = float(np.mean(W * W))
    assert mean_square == pytest.approx(v * (1 - 1 / N), rel=(hi - lo) / (2 * dof))


def _stationary_ensemble(K, N=6, s2=2.5e-3, seed=2):
    beta, gamma = 1.0, 4.0  # λ = 4: stationary after three steps of 1 (e^{−24})
    lam = gamma / beta
    settings = Settings(model="attention", path="static", init_attention="softmax",
                        n_tokens=N, beta=beta, gamma=gamma,
                        logit_noise=math.sqrt(2 * lam * s2), dt=1.0, seed=seed)
    return run_ensemble(settings, K, 3.0, every=3), lam, beta, s2


def _check_small_noise_means(ens, lam, beta, s2):
    """Mean KL, noise work and D at stationarity against the small-noise predictions: within
    ``z σ̂/√K`` (99.9 %) plus ``s²`` × the prediction (the prediction's relative error is
    O(s²); measured −0.32 s² at N = 6 by a 10⁶-sample Monte Carlo)."""
    K = ens.replicas
    kl = ens.diagnostics["kl"][:, -1]
    pred = small_noise_kl(ens.final[0].softmax, s2)
    assert ens.prediction[-1] == pytest.approx(pred, rel=1e-12)
    tol = Z_QUANTILE * kl.std(ddof=1) / math.sqrt(K) + s2 * pred
    assert abs(kl.mean() - pred) <= tol, (kl.mean() / pred, tol / pred)
    # the noise work: a step's kick δ (variance v = s²(1 − e^{−2λh}) per entry) raises F by
    # ⟨∇F, δ⟩ + ½ δᵀ∇²F δ, of mean (v/2β) Σ_i (1 − Σ_j A_ij²): n steps give n v/(βs²) × pred
    h = ens.settings["dt"]
    n = round(ens.times[-1] / h)
    noise_work = ens.diagnostics["noise_work"][:, -1]
    nw_pred = n * -math.expm1(-2 * lam * h) * pred / beta
    tol = Z_QUANTILE * noise_work.std(ddof=1) / math.sqrt(K) + s2 * nw_pred
    assert abs(noise_work.mean() - nw_pred) <= tol, (noise_work.mean() / nw_pred,
                                                      tol / nw_pred)
    D = ens.diagnostics["dissipation_rate"][:, -1]
    D_pred = 2 * lam / beta * pred  # (λ/β) s² Σ_i (1 − Σ_j A*_ij²)
    tol = Z_QUANTILE * D.std(ddof=1) / math.sqrt(K) + s2 * D_pred
    assert abs(D.mean() - D_pred) <= tol, (D.mean() / D_pred, tol / D_pred)
    return kl.mean() / pred


def test_small_noise_mean_kl_and_dissipation():
    ens, lam, beta, s2 = _stationary_ensemble(K=200)
    ratio = _check_small_noise_means(ens, lam, beta, s2)
    assert 0.9 < ratio < 1.1


@pytest.mark.slow
def test_small_noise_mean_kl_large_ensemble():
    """The Theory page's check (N = 6, s² = 2.5e-3) with 4000 replicas: tolerance about
    1.6 % of the prediction."""
    ens, lam, beta, s2 = _stationary_ensemble(K=4000, seed=0)
    _check_small_noise_means(ens, lam, beta, s2)


@pytest.mark.parametrize("model", RELAXING)
def test_the_energy_balance_has_a_noise_term(model):
    """``work`` holds the energy jumps of the noise (``noise_work``): the residual stays at
    integrator accuracy, far below the noise's share that it accounts for."""
    sim = Simulation(_noisy(model, logit_noise=0.5, dt=0.005))
    residuals = []
    for _ in range(8):
        d = sim.step(50).diagnostics
        residuals.append(abs(d["energy_residual"]))
    assert sim.status == "running"
    assert abs(d["noise_work"]) > 0.1
    assert max(residuals) < 2e-3 * abs(d["noise_work"])
    quiet = Simulation(_noisy(model, logit_noise=0.0, dt=0.005)).step(400).diagnostics
    assert quiet["noise_work"] == 0.0
    # ... and work minus the noise's share is the work of the path (0 off a path)
    if model != "attention":
        assert d["work"] == d["noise_work"]


@pytest.mark.parametrize(("model", "path"), [("attention", "rotation"), ("canonical", None)])
def test_the_tracking_bound_still_bounds_the_lag(model, path):
    extra = {"path": path} if path else {}
    sim = Simulation(_noisy(model, logit_noise=0.5, **extra))
    quiet = Simulation(_noisy(model, logit_noise=0.0, **extra))
    for _ in range(30):
        d, q = sim.step(7).diagnostics, quiet.step(7).diagnostics
        assert d["kl"] <= d["kl_bound"]
    assert d["kl_bound"] > q["kl_bound"]


def test_models_that_do_not_relax_attention_do_not_read_it(capsys):
    for spec in models.specs():
        assert ("logit_noise" in spec.reads()) == (spec.name in RELAXING)
        if spec.name in RELAXING:
            assert "logit_noise" in spec.continue_settings
    sim = Simulation(Settings(model="reduced", logit_noise=0.5))
    assert sim.logit_noise == 0.0
    sim.step(20)
    assert sim.state.noise_work == 0.0
    with pytest.raises(SystemExit) as err:
        main(["run", "--model", "reduced", "--logit-noise", "0.3", "--t-end", "0.1"])
    assert err.value.code == 2
    message = capsys.readouterr().err
    assert "logit_noise applies only to the models that relax attention" in message
    assert "'reduced'" in message
    with pytest.raises(ValueError, match=r"logit_noise must be in \[0, 100\], got -0.1"):
        Settings(logit_noise=-0.1)


def test_an_ensemble_reports_bands_and_refuses_bad_input():
    ens = run_ensemble(_noisy("canonical", dt=0.02), 4, 0.2, every=2)
    assert ens.times.shape == (6,) and ens.diagnostics["kl"].shape == (4, 6)
    assert np.allclose(ens.times, np.arange(6) * 0.04)
    assert np.all(ens.std("kl")[1:] > 0) and ens.std("kl")[0] == 0.0  # one start
    assert np.all(np.isfinite(ens.prediction))
    quiet = run_ensemble(Settings(model="reduced", dt=0.02), 2, 0.1)
    assert np.all(np.isnan(quiet.prediction))
    for bad, match in (({"replicas": 0}, "replicas"), ({"t_end": -1.0}, "t_end"),
                       ({"every": 0}, "every")):
        args = {"replicas": 2, "t_end": 0.1, "every": 1, **bad}
        with pytest.raises(ValueError, match=match):
            run_ensemble(Settings(), args["replicas"], args["t_end"], every=args["every"])


@few_examples(12)
@given(model=st.sampled_from(RELAXING), sigma=st.floats(0.01, 100.0),
       beta=st.floats(1e-3, 1e3), gamma=st.floats(1e-3, 1e4), n=st.integers(2, 9),
       seed=st.integers(0, 2**32 - 1))
@example(model="value_matching", sigma=98.92, beta=954.9, gamma=8902.3, n=9, seed=126)
def test_noisy_attention_stays_on_the_simplex(model, sigma, beta, gamma, n, seed):
    """Any σ, β, γ: finite logits, attention rows summing to 1, diagnostics finite where
    defined, the lag within its bound, the clock counting the steps."""
    sim = Simulation(Settings(model=model, logit_noise=sigma, beta=beta, gamma=gamma,
                              n_tokens=n, dim=2, seed=seed))
    frame = sim.step(20)
    if sim.status != "running":  # a run may diverge (its features) or be too stiff for its
        # step (value matching's implicit solve, e.g. σ 99, β 955, γ 8902): it stops with the
        # time and the reason, keeping the last finite state; never a NaN on screen
        assert re.match(r"(diverged|stopped) at t = \S+: ", sim.message), sim.message
        assert np.all(np.isfinite(sim.state.Z)) and np.all(np.isfinite(sim.state.X))
        return
    A = frame.attention  # (entries below 1e-308 underflow to 0, noise or not, at large β)
    assert np.all(np.isfinite(sim.state.Z)) and np.all(A >= 0)
    assert np.max(np.abs(A.sum(axis=1) - 1)) <= 1e-12
    d = frame.diagnostics
    defined = {k: v for k, v in d.items() if k not in models.get(model).not_applicable}
    assert all(math.isfinite(v) for v in defined.values()), defined
    if "kl_bound" in defined:  # (both ~1e-9 near γ/β ~ 7e6: equal to rounding, 1e-17 apart)
        assert d["kl"] <= d["kl_bound"] * (1 + 1e-9) + 1e-14
    assert sim.noise_clock.step == 20


@pytest.mark.parametrize("model, values", [("cotangent_lift", {}),
                                           ("value_matching", {"kappa": 1.0})])
def test_noise_kicks_are_not_graded_as_distant_starts(model, values, monkeypatch):
    """A stiff step after a noise kick takes the kick's transient whole: graded in
    sub-steps like a distant start, every kick above ``GRADED_OSC`` cost a step of 32
    sub-steps or more (N = 64, σ = 5, λh = 1: 36 ms a step instead of 1.4 ms)."""
    from dynamics.steppers.etd_heun import EtdHeun
    from dynamics.steppers.etd_verlet import EtdVerlet

    graded = []
    for cls in (EtdHeun, EtdVerlet):
        original = cls.graded
        monkeypatch.setattr(cls, "graded", lambda self, *a, _o=original, **k: (
            graded.append(1), _o(self, *a, **k))[1])
    s = Settings(model=model, n_tokens=6, dim=3, seed=2, dt=0.01, gamma=100.0,
                 init_momentum="random", init_attention="random", logit_noise=5.0, **values)
    sim = Simulation(s)
    sim.advance(1)  # the distant start itself may be graded
    graded.clear()
    sim.advance(20)
    assert sim.status == "running", sim.message
    assert not graded, f"{len(graded)} of 20 noisy steps graded"
