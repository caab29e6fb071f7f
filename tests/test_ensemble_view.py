"""Fast tier: the noise ensemble tab (app/noise/ensemble.py) driven through its parameters."""

import numpy as np
import pytest
from dashboard_support import play

from app import Dashboard
from app.dashboard import TABS
from app.mainview.controls import build_widgets
from app.models import applies
from app.noise.ensemble import BANDS, EnsembleView
from app.teaching.theory import Theory
from dynamics import Settings


def test_the_ensemble_tab_is_built_when_first_opened_and_draws_bands():
    d = Dashboard(settings=Settings(model="canonical", n_tokens=4, dim=2, logit_noise=0.5,
                                    dt=0.02), playing=False)
    tabs = d.__panel__()[-1]
    index = TABS.index("Noise ensemble")
    assert len(tabs[index]) == 0
    tabs.active = index
    assert len(tabs[index]) == 1
    view = d.ensemble
    assert isinstance(view, EnsembleView) and view.settings is d.settings
    view.param.update(replicas=5, t_end=0.4)
    view.run()
    data = view.source.data
    assert len(data["t"]) == 21 and data["t"][-1] == pytest.approx(0.4)
    for name, _, _ in BANDS:
        mean, lo, hi = (np.asarray(data[f"{name}_{k}"]) for k in ("mean", "lo", "hi"))
        assert np.all(np.isfinite(mean)) and np.all(lo <= mean) and np.all(mean <= hi)
        assert np.all(hi[1:] > lo[1:])  # independent noise spreads the replicas
        np.testing.assert_allclose(mean, view.ensemble.mean(name))
    assert np.all(np.asarray(data["prediction"]) > 0)
    # the reference line is the Theory page's ½ s² Σ_i (1 − Σ_j A*_ij²), s² = σ²/2λ,
    # averaged over the replicas' softmax; one row of bands per replica
    ens = view.ensemble
    assert ens.diagnostics["kl"].shape == (5, 21)
    s2 = 0.5**2 / (2 * d.settings.gamma / d.settings.beta)
    pred = np.mean([0.5 * s2 * np.sum(1 - np.sum(f.softmax**2, axis=1)) for f in ens.final])
    assert data["prediction"][-1] == pytest.approx(pred, rel=1e-12)
    np.testing.assert_allclose(np.asarray(data["prediction"], dtype=float), ens.prediction)
    assert "K = 5 replicas, σ = 0.5" in view.message.object
    assert view.notice() == ""


def test_the_view_says_when_there_is_no_noise():
    view = EnsembleView(settings=Settings(model="reduced", n_tokens=3, dim=2, dt=0.05))
    assert "does not relax attention" in view.notice()
    view.param.update(replicas=2, t_end=0.1)
    view.run()
    assert np.all(np.asarray(view.source.data["prediction"]) == 0.0)  # NaN → 0,
    assert not view.reference.visible  # and the line is hidden: no prediction to draw
    view.settings.model = "attention"
    assert "σ (logit noise) is 0" in view.notice()


def test_an_ensemble_too_long_for_a_click_is_refused_by_name():
    """K × t_end/dt above MAX_STEPS: nothing runs (the page's thread is not held for
    hours), the message names the product and what to change; the last bands stay."""
    view = EnsembleView(settings=Settings(model="attention", n_tokens=3, dim=2, dt=0.01,
                                          logit_noise=0.3))
    view.param.update(replicas=2, t_end=0.1)
    view.run()
    assert view.reference.visible and len(view.source.data["t"]) == 11
    shown = view.ensemble
    view.param.update(replicas=256, t_end=1000.0)
    view.run()
    assert "K × t_end/dt = 256 × 100000 = 25,600,000 steps, more than 50,000" \
        in view.message.object and "lower K or t_end, or raise dt" in view.message.object
    assert view.ensemble is shown and len(view.source.data["t"]) == 11


def test_the_noise_slider_comes_from_the_setting():
    settings = Settings(model="attention")
    widget = build_widgets(settings)["logit_noise"]
    assert widget.name == settings.param.logit_noise.label and widget.end == 2.0
    widget.value = 0.3
    assert settings.logit_noise == 0.3
    assert applies("logit_noise", settings)
    settings.model = "reduced"
    assert not applies("logit_noise", settings)


def test_the_theory_page_has_the_section_the_view_links_to():
    assert "stochastic-logits" in Theory().anchors


def test_the_main_tab_energy_plot_balances_under_noise():
    """What the page shows under noise: the work line holds the noise's energy jumps, so
    E(t) − E(0) lies on work − dissipated and the residual stays at integrator accuracy."""
    d = Dashboard(settings=Settings(model="canonical", n_tokens=5, dim=2, logit_noise=0.8),
                  playing=False)
    play(d, 12)
    data = {k: np.asarray(v, dtype=float) for k, v in d.timeseries.source.data.items()}
    noise_work = d.sim.frame().diagnostics["noise_work"]
    assert abs(noise_work) > 0.05
    np.testing.assert_allclose(data["d_energy"] - data["budget"], data["residual"],
                               atol=1e-12)
    assert np.max(np.abs(data["residual"])) < 1e-2 * abs(noise_work)
    # without the noise's share the budget would miss the energy by that much
    assert abs(data["d_energy"][-1] - (data["budget"][-1] - noise_work)) > 0.5 * abs(noise_work)
