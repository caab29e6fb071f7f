"""Fast tier (issue #16, items 1–2): the guided tour and projector mode.

Every step of the shipped tour is honest at its settings: its ``claim`` is checked here on
the backend (the lab's steps through the lab's own experiment), and the page draws the
step's annotations. Projector mode keeps four plots with ≥ 18 px type and undoes itself.
"""

import math

import numpy as np
import pytest
from helpers import lab_preset_run

from app import Dashboard
from app import presets as presets_module
from app.lab.inertial_lab import load_presets as load_lab_presets
from app.mainview.guides import TIGHT
from app.teaching.tour import load_tour, validate_tour
from dynamics import Settings, Simulation, simulate
from dynamics.clustering import cluster_labels
from dynamics.noise import small_noise_kl, stationary_variance

TOUR = load_tour()
PRESETS = {p["name"]: p for p in presets_module.load_presets()}
LAB_PRESETS = {p["name"]: p for p in load_lab_presets()[0]}
T_END = 10.0


def _run(step, t_end=None):
    """The step's run to its end (where the page pauses it: what the class sees)."""
    preset = PRESETS[step["preset"]]
    t_end = step.get("t_end", T_END) if t_end is None else t_end
    return simulate(Settings(**presets_module.preset_values(preset)), t_end=t_end)


def _check_main(step):
    claim, kind = step["claim"], step["claim"]["kind"]
    preset = PRESETS[step["preset"]]
    values = presets_module.preset_values(preset)
    if kind == "quench_work":
        sim = Simulation(Settings(**values))
        quench = preset["quench"]
        while sim.t < quench["at_t"] - 1e-12:
            sim.advance(1)
        before = sim.frame().diagnostics
        sim.settings.param.update(**{k: v for k, v in quench.items() if k != "at_t"})
        sim.sync()
        (change,) = sim.changes
        after = sim.frame().diagnostics
        jump = after["hamiltonian"] - before["hamiltonian"]
        assert change.work > 1.0 and jump == pytest.approx(change.work, rel=1e-9)
        assert after["work"] - before["work"] == pytest.approx(change.work, rel=1e-9)
        while sim.t < step["t_end"] - 1e-9:  # to the step's end, where the page pauses
            sim.advance(1)
            assert sim.status == "running", sim.message  # never "diverged" on screen
        # measured 1.5e-3 at t = 5 (H's error −8.2e-4, ∫D's −6.4e-4 against the Richardson
        # extrapolation from dt/2 and dt/4; the change's work is above 1): since the
        # canonical model's ∫D below the stiff branch comes from the free-energy balance
        # (issue #31), its error no longer offsets H's (the trapezoidal rule on D erred by
        # +5.2e-4, and the residual read 3.6e-4)
        assert abs(sim.frame().diagnostics["energy_residual"]) < 2e-3 * step["t_end"] / 5
        return
    if kind == "clusters":  # the count at t_end (ε of the preset)
        run = simulate(Settings(**values), t_end=claim["t_end"], every=50)
        count, _ = cluster_labels(run.features[-1], values["cluster_eps"])
        assert count == claim["count"]
        return
    if kind == "noise_kl":  # the time average of one run (stationary, ergodic)
        s = Settings(**values)
        lo, hi = claim["window"]
        run = simulate(s, t_end=hi)
        kl = run.diagnostics["kl"][run.times >= lo].mean()
        predicted = small_noise_kl(Simulation(s).frame().softmax,
                                   stationary_variance(s.logit_noise, s.gamma / s.beta))
        assert kl == pytest.approx(predicted, rel=claim["tolerance"])
        return
    if kind == "near_reduced":
        run = simulate(Settings(**values), t_end=claim["until"])
        reduced = simulate(Settings(**{**values, "model": "reduced"}), t_end=claim["until"])
        gap = np.linalg.norm(run.features - reduced.features, axis=(1, 2))
        size = np.linalg.norm(reduced.features, axis=(1, 2))
        assert np.all(gap <= claim["below"] * size), gap.max()
        return
    run = _run(step)
    d, t = run.diagnostics, run.times
    if kind == "kl_slope":
        lam = values["gamma"] / values["beta"]
        lo, hi = claim["window"]
        sel = (t >= lo) & (t <= hi)
        slope = np.polyfit(t[sel], np.log(d["kl"][sel]), 1)[0]
        assert slope == pytest.approx(-2 * lam, rel=claim["tolerance"]), slope
    elif kind == "tracking":
        late = t >= claim["after"]
        assert np.all(d["kl"] <= d["kl_bound"] + 1e-12)
        assert d["kl"][late].min() > 0.05 * d["kl"][late].max()  # a plateau, never 0
        ratio = d["kl"][1:] / d["kl_bound"][1:]
        assert ratio.max() >= TIGHT  # tight somewhere (early), as the step says,
        assert ratio[t[1:] >= claim["after"]].max() < 0.02  # and loose on the plateau
    elif kind == "budget":  # a prescribed path: F(t) − F(0) = W − ∫D, with work done
        f, work, dissipated = d["free_energy"], d["work"], d["dissipated"]
        assert work[-1] > claim["work_above"] and np.all(np.diff(dissipated) >= 0.0)
        assert dissipated[-1] > 0.1 * work[-1]  # both terms matter
        np.testing.assert_allclose(f - f[0], work - dissipated, rtol=0.0,
                                   atol=1e-3 * work[-1])
        # the work is −∫⟨A, dS/dt⟩: against the trapezoidal rule on the frames' A and
        # S = X M Xᵀ (measured 1.8e-4 apart)
        M = Simulation(Settings(**values)).problem.M
        dS = np.gradient(np.einsum("kia,ab,kjb->kij", run.features, M, run.features), t, axis=0)
        power = -np.einsum("kij,kij->k", run.attention, dS)
        trapezoid = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1])
                                                     * np.diff(t))])
        assert trapezoid[-1] == pytest.approx(work[-1], rel=1e-3)
    elif kind == "converges":
        assert d["kl"][-1] < claim["below"] and d["kl"][0] > 100 * claim["below"]
    elif kind == "energy_law":
        h = d["hamiltonian"]
        assert np.all(np.diff(h) <= 1e-9 * max(1.0, abs(h[0])))
        assert h[-1] < h[0] - 1e-3  # it does dissipate
        # the residual is the time-stepping error: small beside what was dissipated
        assert np.max(np.abs(d["energy_residual"])) < 1e-3 * d["dissipated"][-1]
    elif kind == "conserved":
        h = d["hamiltonian"]
        assert np.max(np.abs(h - h[0])) <= claim["tolerance"] * max(1.0, abs(h[0]))
    else:
        raise AssertionError(f"unknown claim {kind!r}")


def _check_momentum(claim, settings, r):
    """The base case (MODEL.md §14): Nesterov under its bound at every frame, ahead of the
    gradient flow and the heavy ball from ``ahead_after`` on, overshooting the minimum
    along the flat direction where the gradient flow does not; the heavy ball tuned to
    a_min ahead at the end; every run on its closed form."""
    runs = r.runs
    assert settings["nesterov_r"] == 3.0 and settings["nesterov_t0"] == 0.0  # "2|x₀|²/t²"
    assert r.bound_holds is True
    ahead = r.ahead_from("nesterov", ("gradient_flow", "heavy_ball"))
    assert ahead is not None and ahead <= claim["ahead_after"], ahead
    assert runs["critical"].suboptimality[-1] < 1e-2 * runs["nesterov"].suboptimality[-1]
    x0 = r.X0[0]
    assert x0[1] > 0 and runs["nesterov"].path().y.min() < -0.05 * x0[1]  # overshoot
    assert runs["gradient_flow"].path().y.min() > 0
    for run in runs.values():
        assert run.exact_error is not None and run.exact_error <= claim["tolerance"], run.label


def _check_lab(step):
    claim, kind = step["claim"], step["claim"]["kind"]
    if kind == "momentum_base_case":
        _check_momentum(claim, LAB_PRESETS[step["lab_preset"]]["settings"],
                        lab_preset_run(step["lab_preset"]))
        return
    r = lab_preset_run(step["lab_preset"])
    if kind == "first_order_blowup":
        assert r.first_order_time == pytest.approx(claim["expected"], rel=claim["tolerance"])
    elif kind == "delayed_blowup":
        assert math.isfinite(r.accelerated_time)
        assert r.accelerated_time > r.first_order_time * 1.1
    elif kind == "no_blowup":
        assert math.isinf(r.first_order_time) and math.isinf(r.accelerated_time)
    elif kind == "same_moments":
        curves = list(r.cloud_moments.values())
        for c in curves[1:]:
            np.testing.assert_allclose(c.y, curves[0].y, rtol=claim["tolerance"])
    elif kind == "softmax_momentum_slower":  # from rest: inertial ≤ momentum-only ≤ first order
        curves = r.softmax
        first, momentum, inertial = (curves[k] for k in (
            "softmax_first_order", "softmax_momentum", "softmax_inertial"))
        n = len(first.y)
        assert n > 10 and len(momentum.y) == len(inertial.y) == n  # none stopped early
        np.testing.assert_array_equal(first.x, inertial.x)
        assert first.y[0] == pytest.approx(inertial.y[0], rel=1e-12)  # one start
        assert np.all(inertial.y[1:] < momentum.y[1:]) and np.all(momentum.y[1:] < first.y[1:])
        at = np.searchsorted(first.x, claim["t"] - 1e-9)
        assert first.x[at] == pytest.approx(claim["t"])
        assert inertial.y[at] < claim["ratio_below"] * first.y[at]
    elif kind == "layer_crossing":
        assert r.crossing_layer is not None and r.predicted_layer is not None
        assert abs(r.crossing_layer - r.predicted_layer) <= claim["tolerance"]
    else:
        raise AssertionError(f"unknown claim {kind!r}")


def test_the_shipped_tour_is_valid_and_walks_both_parts():
    assert validate_tour(TOUR, list(PRESETS), list(LAB_PRESETS)) == []
    steps = TOUR["steps"]
    assert all("claim" in s for s in steps)
    tabs = [s.get("tab", "main") for s in steps]
    assert tabs == sorted(tabs, key=("main", "lab").index)  # Part I, then Part II
    assert {s["preset"] for s in steps if "preset" in s} == set(PRESETS)  # every result


@pytest.mark.parametrize("number", range(1, len(TOUR["steps"]) + 1))
def test_each_step_claim_holds_at_its_settings(number):
    step = TOUR["steps"][number - 1]
    (_check_lab if step.get("tab") == "lab" else _check_main)(step)


def test_bad_tours_name_their_problems():
    bad = {"name": "x", "steps": [
        {"title": "a", "text": "b", "preset": "no such preset"},
        {"title": "a", "text": "b", "tab": "lab", "lab_preset": "nope"},
        {"title": 1, "text": "b", "preset": next(iter(PRESETS)), "annotations": ["arrows"],
         "colour": "red"},
    ]}
    problems = validate_tour(bad, list(PRESETS), list(LAB_PRESETS))
    assert any("step 1: no preset of the main tab named 'no such preset'" in p
               for p in problems)
    assert any("step 2: no preset of the lab named 'nope'" in p for p in problems)
    assert any("step 3: unknown annotation 'arrows'" in p for p in problems)
    assert any("step 3: unknown field 'colour'" in p for p in problems)
    assert any("step 3: 'title' must be a text" in p for p in problems)
    assert validate_tour([], [], []) == ['a tour must be a JSON object with a list "steps"']


def _step_of(preset: str) -> int:
    return next(i for i, s in enumerate(TOUR["steps"], 1) if s.get("preset") == preset)


def test_the_page_draws_the_relaxation_slope_and_moves_by_keys():
    d = Dashboard(playing=False, query={"tour_step": "1"})
    d.__panel__()
    assert "Tour 1/21" in d.tour.title.object and d.settings.path == "static"
    while d.sim.t < 5.5:
        d.tick()
    guide = d.timeseries.guides.slope.data
    lam = d.settings.gamma / d.settings.beta
    slope = (math.log(guide["kl"][1]) - math.log(guide["kl"][0])) / (guide["t"][1] - guide["t"][0])
    assert slope == pytest.approx(-2 * lam, rel=1e-12)
    assert d.timeseries.guides.slope_line.visible
    d.tour.keys.forward += 1  # the → key
    assert d.tour_step == 2 and "Tour 2/21" in d.tour.title.object
    assert d.settings.weights == "minilm" and d.timeseries.guides.slope_line.visible
    d.tour_step = _step_of("Attention at rest under noise")
    assert not d.timeseries.guides.slope_line.visible
    d.tour_step = 2
    d.tour.keys.back += 1
    assert d.tour_step == 1
    d.tour_step = _step_of("Persistent lag under rotation")
    assert d.timeseries.guides.tight_points.visible
    d.tour_step = _step_of("Reduced model conserves energy")
    assert d.settings.model == "reduced" and d.timeseries.guides.zero.visible
    lab_step = next(i for i, s in enumerate(TOUR["steps"], 1) if s.get("tab") == "lab")
    d.tour_step = lab_step  # Part II: the lab
    assert d.tabs.active == 1 and d.lab.preset == TOUR["steps"][lab_step - 1]["lab_preset"]
    d.tour_step = 0
    assert not d.tour.shown and not d.timeseries.guides.zero.visible


def test_projector_mode_keeps_five_plots_in_large_type_and_undoes_itself():
    """A(t) beside A*(t) (issue #27: the comparison the lecture is about), the tokens, the
    lag and the energy balance; no toolbar over the titles, no developer status line."""
    d = Dashboard(playing=False)
    d.__panel__()
    before = {f: (f.visible, f.width, f.height, f.toolbar_location, f.title.text)
              for f in d.plot_panes}
    d.projector = True
    shown = [f for f in d.plot_panes if f.visible]
    assert shown[:2] == [d.heatmaps.fig_attention, d.heatmaps.fig_softmax]
    assert len(shown) == 5 and not d.sidebar.visible and not d.explanation_pane.visible
    assert not d.status.visible and all(f.toolbar_location is None for f in shown)
    for fig in shown:
        for axis in (*fig.xaxis, *fig.yaxis):
            assert int(axis.axis_label_text_font_size.rstrip("px")) >= 18
            assert int(axis.major_label_text_font_size.rstrip("px")) >= 18
    d.sidebar_toggle.value = True  # the controls opened as a drawer over the plots
    assert d.sidebar.visible and d.sidebar.styles["position"] == "fixed"
    d.settings.n_tokens = 7  # a new run: projector mode is done again, the drawer stays
    assert d.sidebar_toggle.value and d.sidebar.styles["position"] == "fixed"
    assert len([f for f in d.plot_panes if f.visible]) == 5
    d.sidebar_toggle.value = False
    d.projector = False
    assert {f: (f.visible, f.width, f.height, f.toolbar_location, f.title.text)
            for f in d.plot_panes} == before
    assert d.sidebar.visible and d.explanation_pane.visible and d.status.visible
    # the drawer is the sidebar again (each style it had is sent back empty: the page
    # removes a style only when told so)
    assert not d.sidebar.styles.get("position")


def test_the_tour_exports_its_slides_at_once(tmp_path, capsys):
    """Every step gets a 1920×1080 slide (a short tour here: two steps run to t = 1 and a
    lab step, which gets the lab's plots); a bad tour writes nothing."""
    import matplotlib.image

    from app.__main__ import main

    short = {"name": "short", "steps": [
        {**TOUR["steps"][0], "t_end": 1.0}, {**TOUR["steps"][2], "t_end": 1.0},
        next(s for s in TOUR["steps"] if s.get("tab") == "lab")]}
    path = tmp_path / "tour.json"
    path.write_text(__import__("json").dumps(short), encoding="utf-8")
    assert main(["tour-slides", str(tmp_path / "out"), "--formats", "png",
                 "--tour", str(path)]) == 0
    files = sorted((tmp_path / "out").glob("*.png"))
    assert [f.name[:3] for f in files] == ["01_", "02_", "03_"]
    for f in files:
        assert matplotlib.image.imread(f).shape[:2] == (1080, 1920)
    assert "no slide" not in capsys.readouterr().out
    short["steps"][0]["preset"] = "no such preset"
    path.write_text(__import__("json").dumps(short), encoding="utf-8")
    assert main(["tour-slides", str(tmp_path / "bad"), "--tour", str(path)]) == 2
    assert not (tmp_path / "bad").exists()


def test_projector_mode_follows_the_model_to_the_sphere_and_back():
    """At the sphere's tour step projector mode shows the clustering view's four plots
    (the step speaks of them), back at a step of attention its four plots again."""
    d = Dashboard(playing=False, query={"projector": "true", "tour_step": "1"})
    d.__panel__()
    kept = d.projector_mode.shown_figures()
    assert [f for f in d.plot_panes if f.visible] == list(kept)
    d.tour_step = _step_of("Clustering on the sphere")
    shown = [f for f in d.plot_panes if f.visible]
    assert shown == list(d.clustering.figures[:4])
    assert all(int(a.axis_label_text_font_size.rstrip("px")) >= 18
               for f in shown for a in (*f.xaxis, *f.yaxis))
    d.tour_step = 1
    assert [f for f in d.plot_panes if f.visible] == list(kept)
    d.projector = False
    assert d.heatmaps.fig_softmax.visible and not any(f.visible for f in d.clustering.figures)


def test_next_back_and_end_buttons_move_through_the_tour():
    """The buttons, not only the keys: Next and Back move one step (disabled at the ends),
    End leaves the tour."""
    d = Dashboard(playing=False, query={"tour_step": "1"})
    d.__panel__()
    tour = d.tour
    assert tour.back.disabled and not tour.next.disabled
    tour.next.clicks += 1
    assert d.tour_step == 2 and "Tour 2/" in tour.title.object and not tour.back.disabled
    tour.back.clicks += 1
    assert d.tour_step == 1
    d.tour_step = len(TOUR["steps"])
    assert tour.next.disabled
    tour.next.clicks += 1
    assert d.tour_step == len(TOUR["steps"])  # stays at the last step
    tour.end.clicks += 1
    assert d.tour_step == 0 and not tour.shown


def test_the_quench_step_marks_its_quench_on_the_plots():
    """The quench step loads its preset, and its quench, once run past, is marked."""
    d = Dashboard(playing=False, query={"tour_step": str(_step_of("β quench at t = 3"))})
    d.__panel__()
    quench = PRESETS["β quench at t = 3"]["quench"]
    assert d.timeseries.markers == []
    while d.sim.t < quench["at_t"] + 0.2:
        d.tick()
    ((t_first, _, label),) = d.timeseries.markers
    assert t_first == pytest.approx(quench["at_t"], abs=d.settings.dt) and label.startswith("β ")


def test_projector_mode_draws_in_black_with_thicker_lines():
    """High contrast: black titles, axis and tick labels; every line 1.75 times thicker;
    all of it given back when switched off."""
    from app.teaching.projector import LINE_SCALE

    d = Dashboard(playing=False)
    d.__panel__()
    energy = d.timeseries.fig_energy
    widths = {r: r.glyph.line_width for r in energy.renderers
              if isinstance(getattr(r.glyph, "line_width", None), (int, float))}
    assert widths
    d.projector = True
    for fig in d.projector_mode.shown_figures():
        assert fig.title.text_color == "black"
        for axis in (*fig.xaxis, *fig.yaxis):
            assert axis.axis_label_text_color == axis.major_label_text_color == "black"
    for r, width in widths.items():
        assert r.glyph.line_width == pytest.approx(width * LINE_SCALE)
    d.projector = False
    assert {r: r.glyph.line_width for r in widths} == widths
    assert energy.title.text_color != "black"


def test_a_model_change_that_puts_back_seed_weights_still_retunes_the_slope_guide():
    """The real-head step's slope guide, then a model and β changed together (pasted
    settings) to a model that runs no real head: the seed weights come back, and the
    guide follows the new λ = γ/β (the early return for the weights had skipped it)."""
    d = Dashboard(playing=False, query={"tour_step": "2"})
    d.__panel__()
    assert d.settings.weights == "minilm" and "kl_slope" in d.timeseries.guides.kinds
    d.settings.param.update(model="sphere", beta=3.0)
    assert d.settings.weights == "seed"
    assert d.timeseries.guides.lam == pytest.approx(d.settings.gamma / 3.0)


@pytest.mark.parametrize("window, scale", [((0, 0), 1.0), ((1280, 720), 1.0),
                                           ((1024, 768), 1.0), ((1920, 1080), 1.45),
                                           ((3840, 2160), 2.0)])
def test_projector_mode_scales_to_the_window(window, scale):
    """Projector mode's sizes and type grow with the window the page reports (a 1920×1080
    projector: 1.45 times), never below the 1280×720 sizes, at most twice them."""
    from app.teaching.projector import SIZES

    d = Dashboard(playing=False)
    d.__panel__()
    d.projector = True
    d.projector_mode.window.param.update(inner_width=window[0], inner_height=window[1])
    assert d.projector_mode.scale == pytest.approx(scale)
    fig = d.heatmaps.fig_attention
    assert (fig.width, fig.height) == tuple(round(v * scale) for v in SIZES["heatmap"])
    assert fig.xaxis[0].axis_label_text_font_size == f"{round(18 * scale)}px"
    d.projector = False
    assert fig.width == 310 and fig.xaxis[0].axis_label_text_font_size != "18px"


# -- issue #35, item 3: runs that end, with the evidence in view --------------------------
MAIN_STEPS = [i for i, s in enumerate(TOUR["steps"], 1) if s.get("tab", "main") == "main"]


@pytest.mark.parametrize("number", MAIN_STEPS)
def test_each_main_step_ends_with_its_evidence_inside_the_plots_window(number):
    """Every step of the main tab (and its preset) has an end; the claim's window ends by
    then; the time series' window still holds the whole run there (nothing scrolled away
    at the default speed); a quench happens before it."""
    from app.mainview.timeseries import ROLLOVER

    step = TOUR["steps"][number - 1]
    preset = PRESETS[step["preset"]]
    assert "t_end" in step and "t_end" in preset
    t_end, claim = step["t_end"], step["claim"]
    values = presets_module.preset_values(preset)
    steps_per_frame = Dashboard.param.steps_per_frame.default
    assert ROLLOVER * steps_per_frame * values["dt"] >= t_end
    assert t_end >= max(claim.get("window", [0, 0])[1], claim.get("until", 0),
                        claim.get("after", 0), claim.get("t_end", 0))
    if "quench" in preset:
        assert preset["quench"]["at_t"] < t_end


def test_the_cotangent_lift_step_ends_while_its_law_visibly_holds():
    """Step 9 says "the law still holds": up to its end the residual stays tiny beside
    what was dissipated, and the run never diverges. (Its H has no floor: it falls from 8.65
    to −42.5 by t = 5 and to −7085 by t = 10, so the step ends at t = 5, where the energies
    are still of a readable size.)"""
    step = TOUR["steps"][_step_of("Energy-dissipation law: cotangent lift") - 1]
    run = _run(step)
    d = run.diagnostics
    assert run.times[-1] == pytest.approx(step["t_end"])
    assert np.max(np.abs(d["energy_residual"])) < 1e-3 * d["dissipated"][-1]


def test_a_step_run_pauses_at_its_end_and_replay_runs_it_again():
    """The page pauses a step's run exactly at its t_end, says so (status line and the
    banner's clock), advances no further; Replay starts again from t = 0 and plays."""
    d = Dashboard(query={"tour_step": "10"})
    d.__panel__()
    step = TOUR["steps"][9]
    d.steps_per_frame = 40  # an end not on the frames' grid: the last frame is shorter
    assert d.playing and d.run_end == step["t_end"]
    assert "/ 5" in d.tour.clock.object
    for _ in range(1000):
        if d.ended:
            break
        d.tick()
    assert d.ended and not d.playing
    assert d.sim.t == pytest.approx(step["t_end"], abs=1e-9)
    assert "ended" in d.status.object and d.tour.clock.object.startswith("■ t = 5.0 / 5")
    t = d.sim.t
    d.tick()
    assert d.sim.t == t  # no further
    d.tour.replay.clicks += 1
    assert d.sim.t == 0.0 and d.playing and not d.ended
    d.tick()
    assert d.sim.t > 0
    d.tour_step = 1  # another step: its own end
    assert d.run_end == TOUR["steps"][0]["t_end"] and d.playing


def test_a_preset_ends_and_settings_changed_by_hand_stream_on():
    d = Dashboard(playing=False)
    d.__panel__()
    assert d.run_end is None  # the default page streams on
    d.load_preset(PRESETS["Relaxation to softmax (fixed features)"])
    assert d.run_end == 10.0
    d.settings.beta = 3.0  # your own settings now
    assert d.run_end is None


@pytest.mark.parametrize("t_end, problem", [(0.0, "'t_end' must be a time in (0, 1000]"),
                                            (True, "got True"), ("5", "got '5'"),
                                            (2000, "got 2000")])
def test_a_preset_or_step_with_a_bad_end_is_refused(t_end, problem):
    preset = {**PRESETS["Relaxation to softmax (fixed features)"], "t_end": t_end}
    assert any(problem in p for p in presets_module.validate(preset))
    quench = {**PRESETS["β quench at t = 3"], "t_end": 2.0}  # before its own quench
    assert any("(3, 1000]" in p for p in presets_module.validate(quench))
    tour = {"name": "x", "steps": [{**TOUR["steps"][0], "t_end": t_end}]}
    assert any(problem in p for p in validate_tour(tour, list(PRESETS), list(LAB_PRESETS)))


def test_a_diverged_run_says_why_in_the_notice_and_the_banner():
    """Item 4, page side: a run whose engine stops ("diverged") says so in the page's
    notice and the tour's clock (shown in projector mode too), and plots no further."""
    d = Dashboard(query={"tour_step": "7"})
    d.__panel__()
    d.settings.norm_limit = 1.0  # (the features' norm is above it: the engine stops)
    for _ in range(200):
        if d.sim.status != "running":
            break
        d.tick()
    assert d.sim.status == "diverged" and not d.playing
    assert d.sim.message and d.sim.message in d.notice and d.alert.visible
    assert "diverged" in d.tour.clock.object
    rows = len(d.timeseries.source.data["t"])
    d.tick()
    assert len(d.timeseries.source.data["t"]) == rows


def test_the_banner_is_readable_in_projector_mode():
    """Item 6 (the banner's part): its title, text and clock at ≥ 18 px in projector mode,
    scaled with the plots on a larger screen, the page's own size again once off."""
    d = Dashboard(playing=False, query={"projector": "true", "tour_step": "1"})
    d.__panel__()
    sizes = [int(p.styles["font-size"].removesuffix("px"))
             for p in (d.tour.title, d.tour.text, d.tour.clock)]
    assert sizes == [18, 18, 18]
    d.projector_mode.window.param.update(inner_width=1920, inner_height=1080)
    assert d.tour.text.styles["font-size"] == f"{round(18 * d.projector_mode.scale)}px"
    assert d.projector_mode.scale > 1
    d.projector = False
    assert "font-size" not in d.tour.text.styles


def test_next_and_back_between_a_seeded_run_and_a_sentence_relabel_every_token():
    """Issue #35, item 7: Next from step 1 (a seeded run, numbered tokens) to step 2 (a
    sentence) once labelled A and A* "0, the, 2, didn, 4, t" — the previous run's numbers
    among the words. Every axis's text, at every token of the run shown, is that run's
    (so a page that kept any old text finds it overwritten), and every tick has a text."""
    d = Dashboard(playing=False, query={"tour_step": "1"})
    d.__panel__()

    def check(words: bool):
        d.step_once()
        frame = d.history[-1]
        n = frame.features.shape[0]
        expected = ({i: t for i, t in enumerate(frame.tokens)} if words
                    else {i: str(i) for i in range(n)})
        assert bool(frame.tokens) == words
        for fig in d.heatmaps.figures:
            for axis in (fig.xaxis[0], fig.yaxis[0]):
                texts = {int(k): v for k, v in axis.major_label_overrides.items()}
                assert texts == expected, (fig.title.text, texts)
                ticks = list(axis.ticker.ticks)
                assert ticks and set(ticks) <= set(range(n))
                assert ticks == (list(range(n)) if words else ticks)

    check(words=False)
    d.tour.next.clicks += 1
    assert d.tour_step == 2
    check(words=True)
    d.tour.back.clicks += 1
    assert d.tour_step == 1
    check(words=False)


# -- issue #35 review: the plots a step's text names are on the screen --------------------
@pytest.mark.parametrize("projector", [False, True], ids=["page", "projector"])
def test_every_step_shows_every_plot_its_text_names_and_scrolls_to_the_first(projector):
    """Each step names the plots its text speaks of (``plots``, the evidence first); every
    one is shown at that step, in projector mode too (which keeps fewer, larger plots:
    the real-head step's lag on its log axis beside A and A*, the reduced-model step's
    distance plot), and the page scrolls the first into view when the step opens."""
    from app.lab.plot_area import NAMES as LAB_PLOTS
    from app.mainview.layout import PLOT_NAMES

    query = {"tour_step": "1", **({"projector": "true"} if projector else {})}
    d = Dashboard(playing=False, query=query)
    d.__panel__()
    for number, step in enumerate(TOUR["steps"], 1):
        d.tour_step = number
        names = step["plots"]
        lab = step.get("tab") == "lab"
        assert names and set(names) <= set(LAB_PLOTS if lab else PLOT_NAMES), number
        if lab:
            named = [d.lab.plot_area.figures[n] for n in names]
            shown = d.lab.shown_figures()
        else:
            named = d.tour.named_figures()
            shown = [f for f in d.plot_panes if f.visible]
            if projector:
                assert set(shown) == set(d.projector_mode.shown_figures()), number
        missing = [n for n, f in zip(names, named, strict=True) if f not in shown]
        assert not missing, f"step {number} names {missing}, not shown"
        assert d.tour.scroll.target == named[0].id


def test_the_noise_step_draws_the_predicted_level_and_keeps_the_axis_on_the_lag():
    """Step 3: the dashed line of the predicted stationary lag ½ s² Σᵢ(1 − Σⱼ A*ᵢⱼ²)
    (s² = σ²/2λ) on the KL plots, and no tracking bound (~600 there, it squashed the lag
    of ~0.5 to the axis's foot): the axis spans the lag. Replay keeps it so; the next
    step has its bound again."""
    number = _step_of("Attention at rest under noise")
    d = Dashboard(playing=False, query={"tour_step": str(number)})
    d.__panel__()
    s, ts = d.settings, d.timeseries
    predicted = small_noise_kl(Simulation(Settings(**presets_module.preset_values(
        PRESETS["Attention at rest under noise"]))).frame().softmax,
        stationary_variance(s.logit_noise, s.gamma / s.beta))
    for fig in (ts.fig_kl, ts.fig_kl_log):
        (span, label) = ts.guides.level_lines[fig]
        assert span.visible and span.location == pytest.approx(predicted, rel=1e-12)
        assert label.visible and f"{predicted:.3g}" in label.text
    for _ in range(2):  # the step's run, then its Replay
        while d.sim.t < 6.0:
            d.tick()
        kl = np.asarray(ts.source.data["kl"])[np.asarray(ts.source.data["t"]) >= 3.0]
        assert not ts.lines["kl_bound_log"].visible and not ts.lines["kl_bound"].visible
        assert ts.legend_items["kl_bound_log"].visible is False
        y = ts.fig_kl_log.y_range
        assert y.start <= predicted <= y.end and y.end < 10 * kl.max()  # the lag fills it
        d.replay()
    d.tour_step = number + 1
    assert ts.lines["kl_bound_log"].visible and not ts.guides.level_lines[ts.fig_kl_log][0].visible


def test_the_tour_texts_write_maths_as_a_class_reads_it():
    """No raw underscores (W_V, λ_max) or ASCII maths in a step's text or in the caption
    of a preset it opens (they are read off a projector): subscripts are Unicode (Wᵥ,
    λₘₐₓ, A*ᵢⱼ), as the rest of the tour writes them."""
    import re

    lab_captions = {p["name"]: p["caption"] for p in load_lab_presets()[0]}
    for number, step in enumerate(TOUR["steps"], 1):
        texts = [step["title"], step["text"],
                 PRESETS[step["preset"]].get("caption", "") if "preset" in step
                 else lab_captions[step["lab_preset"]]]
        for text in texts:
            raw = re.findall(r"\S*[^\s⌈]_[^\s]\S*", text.replace("T_θ", ""))
            assert not raw, f"step {number}: {raw}"


def test_the_two_blow_up_steps_say_what_their_runs_show():
    """Step 16's plot already shows the momentum flow (no friction) blowing up at π/√2
    beside the first-order Tₘₐₓ = 1, so its text says so; step 17 adds friction and
    blows up later still: each number said is the run's."""
    first = lab_preset_run(TOUR["steps"][15]["lab_preset"])
    damped = lab_preset_run(TOUR["steps"][16]["lab_preset"])
    assert first.first_order_time == pytest.approx(1.0, rel=1e-3)
    assert first.accelerated_time == pytest.approx(math.pi / math.sqrt(2), rel=1e-3)
    assert "2.22" in TOUR["steps"][15]["text"] and "2.22" in TOUR["steps"][16]["text"]
    assert f"{damped.accelerated_time:.2f}" in TOUR["steps"][16]["text"]
    assert damped.accelerated_time > first.accelerated_time > first.first_order_time


def test_projector_heatmaps_number_fewer_tokens_so_their_labels_stay_apart():
    """At N = 16 the 300 px heatmaps numbered every second token at 18 px: "10", "12",
    "14" ran together ("101214"). Projector mode numbers at most five (0, 5, 10, 15),
    after a new run too, and gives the page's ticks back when off."""
    d = Dashboard(playing=False, query={"tour_step": "10"})
    d.__panel__()
    fig = d.heatmaps.fig_attention
    assert d.settings.n_tokens == 16
    before = list(fig.xaxis[0].ticker.ticks)
    d.projector = True
    for _ in range(2):  # as opened, then after a new run (Replay)
        for f in (fig, d.heatmaps.fig_softmax):
            for axis in (f.xaxis[0], f.yaxis[0]):
                assert list(axis.ticker.ticks) == [0, 5, 10, 15]
        d.replay()
        d.tick()
    d.projector = False
    assert list(fig.xaxis[0].ticker.ticks) == before and len(before) > 5


def test_in_plot_labels_are_large_and_never_crossed_out():
    """Step 1's slope label sat under its own dashes and the quench step's β marker was
    10 pt grey: the guides' and markers' labels are 12 pt on a white ground, above the
    slope's dashes; in projector mode the time series' labels are at the axes' 18 px."""
    from bokeh.models import Label, LabelSet

    d = Dashboard(playing=False, query={"tour_step": "1"})
    d.__panel__()
    ts = d.timeseries
    labels = [x for f in (ts.fig_kl_log, ts.fig_energy)
              for x in (*f.select(Label), *f.select(LabelSet)) if x is not ts.diverged_note]
    assert labels
    for label in labels:
        assert label.text_font_size == "12pt" and label.background_fill_color is not None
    assert ts.guides.slope_label.y_offset > 0
    d.projector = True
    for label in labels:
        assert int(label.text_font_size.removesuffix("px")) >= 18
    d.projector = False
    assert all(label.text_font_size == "12pt" for label in labels)


def test_projector_log_kl_axis_labels_a_few_decades_only():
    """Bokeh's log ticker labels every decade of ten whatever it is asked: at 18 px on
    the projector's 236 px lag plot (steps 1, 5: ten decades) the labels were drawn over
    each other. Projector mode gives that axis a ticker of at most four decades, and the
    page's log ticker back when off."""
    from bokeh.models import CustomJSTicker, LogTicker

    from app.teaching.projector import SERIES_TICKS, decade_ticker

    d = Dashboard(playing=False, query={"tour_step": "1"})
    d.__panel__()
    axis = d.timeseries.fig_kl_log.yaxis[0]
    assert isinstance(axis.ticker, LogTicker)
    d.projector = True
    assert isinstance(axis.ticker, CustomJSTicker)
    assert f"/ {SERIES_TICKS})" in axis.ticker.major_code
    assert decade_ticker(3).major_code != decade_ticker(4).major_code
    d.projector = False
    assert isinstance(axis.ticker, LogTicker)


def test_the_noise_steps_page_to_take_home_draws_the_predicted_level_too():
    """The tour's static page of step 3 (``tour-html``) draws the same predicted level
    on its lag plot as the live page, and leaves the bound out."""
    from bokeh.models import Span

    from app.teaching.standalone import page_layout
    from app.teaching.standalone_page import settings_run

    values = presets_module.preset_values(PRESETS["Attention at rest under noise"])
    s = Settings(**values)
    run = settings_run(s, 2.0)
    layout = page_layout(run, ["noise_level"], s.gamma / s.beta)
    predicted = small_noise_kl(Simulation(Settings(**values)).frame().softmax,
                               stationary_variance(s.logit_noise, s.gamma / s.beta))
    spans = [m for m in layout.select({"type": Span}) if m.visible and m.dimension == "width"
             and m.location == pytest.approx(predicted, rel=1e-9)]
    assert spans
