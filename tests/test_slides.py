"""Figures for slides (issue #16, item 3): the files are valid images of a 16:9 slide's
size, read back by real decoders, and what a slide draws is the run's data."""

import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from dashboard_support import play, small_dashboard
from helpers import lab_preset_run
from matplotlib.image import imread

from app.mainview.ranges import LOG_FLOOR
from app.teaching import slides
from app.teaching.pinned import RunRecord
from dynamics import Settings

SETTINGS = Settings(n_tokens=6, dim=3, seed=3)


@pytest.fixture(scope="module")
def frames():
    frames, _ = slides.run_frames(SETTINGS, 1.0)
    return frames


@pytest.fixture(scope="module")
def ghost():
    frames, _ = slides.run_frames(SETTINGS.copy(beta=4.0), 1.5)
    return RunRecord.from_frames(SETTINGS.copy(beta=4.0), frames)


@pytest.fixture(scope="module")
def figure(frames, ghost):
    run = slides.SlideRun.from_frames(SETTINGS, frames)
    return slides.slide_figure(run, caption="**Relaxation** — [look](#here)", pinned=[ghost])


def test_png_is_1920_by_1080(figure):
    data = slides.figure_bytes(figure, "png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(io.BytesIO(data), format="png")
    assert pixels.shape[:2] == (1080, 1920)
    assert np.ptp(pixels[..., :3]) > 0.5  # not a blank page


def test_svg_is_a_16_by_9_slide(figure):
    root = ET.fromstring(slides.figure_bytes(figure, "svg"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height")) == ("960pt", "540pt")  # 13.333 × 7.5 in
    assert [float(v) for v in root.get("viewBox").split()] == [0, 0, 960, 540]
    assert b"Date" not in ET.tostring(root)  # no creation date: same run, same file


def test_pdf_page_is_a_16_by_9_slide(figure):
    data = slides.figure_bytes(figure, "pdf")
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    boxes = re.findall(rb"/MediaBox\s*\[\s*([\d.\s]+)\]", data)
    assert [[float(v) for v in box.split()] for box in boxes] == [[0, 0, 960, 540]]


def test_unknown_format_is_refused(figure):
    with pytest.raises(ValueError, match="format must be one of png, svg, pdf"):
        slides.figure_bytes(figure, "gif")


def test_curves_drawn_are_the_runs(figure, frames, ghost):
    ax = figure.slide_axes
    t = np.array([f.t for f in frames])
    kl = np.array([f.diagnostics["kl"] for f in frames])
    bound = np.array([f.diagnostics["kl_bound"] for f in frames])
    h = np.array([f.diagnostics["hamiltonian"] for f in frames])
    lines = ax["kl"].get_lines()
    np.testing.assert_array_equal(lines[0].get_xdata(), t)
    np.testing.assert_array_equal(lines[0].get_ydata(), np.maximum(kl, LOG_FLOOR))
    np.testing.assert_array_equal(lines[1].get_ydata(), np.maximum(bound, LOG_FLOOR))
    assert ax["kl"].get_yscale() == "log"
    np.testing.assert_array_equal(lines[2].get_ydata(),
                                  np.maximum(ghost.curves["kl"], LOG_FLOOR))
    energy = ax["energy"].get_lines()
    np.testing.assert_allclose(energy[0].get_ydata(), h - h[0], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(energy[-1].get_xdata(), ghost.times)
    # the legends name the settings in which the pinned run differs: β = 1 vs β = 4
    labels = [t.get_text() for t in ax["kl"].get_legend().get_texts()]
    assert labels[0].endswith("β = 1") and labels[2] == "pinned — β = 4"


def test_maps_and_tokens_drawn_are_the_last_frames(figure, frames):
    ax = figure.slide_axes
    np.testing.assert_array_equal(ax["A"].images[0].get_array(), frames[-1].attention)
    np.testing.assert_array_equal(ax["A*"].images[0].get_array(), frames[-1].softmax)
    X0, X = frames[0].features, frames[-1].features
    mean = X0.mean(axis=0)
    _, _, vt = np.linalg.svd(X0 - mean)
    ends = ax["tokens"].collections[-1].get_offsets()  # this run's final positions
    # the principal axes are defined up to sign: compare the absolute coordinates
    np.testing.assert_allclose(np.abs(ends), np.abs((X - mean) @ vt[:2].T), atol=1e-12)


def test_linear_kl_axis_draws_the_raw_kl(frames):
    run = slides.SlideRun.from_frames(SETTINGS, frames)
    fig = slides.slide_figure(run, log_kl=False, color_scale="logarithmic")
    kl = np.array([f.diagnostics["kl"] for f in frames])
    np.testing.assert_array_equal(fig.slide_axes["kl"].get_lines()[0].get_ydata(), kl)
    assert fig.slide_axes["kl"].get_yscale() == "linear"
    with pytest.raises(ValueError, match="color_scale must be one of"):
        slides.slide_figure(run, color_scale="rainbow")


def test_caption_is_plain_text():
    text = slides.plain_caption("**β quench** — see [the Theory page](#protocol-work)  \n*Q*")
    assert text == "β quench — see the Theory page Q"


@pytest.mark.slow
def test_dashboard_slide_is_its_view():
    d = small_dashboard()
    play(d, 6)
    d.timeseries.log_kl = False
    fig = slides.dashboard_slide(d)
    kl = [f.diagnostics["kl"] for f in d.history]
    np.testing.assert_array_equal(fig.slide_axes["kl"].get_lines()[0].get_ydata(), kl)
    (button,) = [b for b in d.slide_downloads if b.label == "Slide PNG"]
    data = button.callback().getvalue()
    assert imread(io.BytesIO(data), format="png").shape[:2] == (1080, 1920)
    assert button.filename.startswith("slide_canonical_t") and button.filename.endswith(".png")


@pytest.mark.slow
def test_tour_figures_writes_one_slide_per_step(tmp_path):
    steps = [{"title": "Relaxation: slope −2λ", "settings": {"n_tokens": 4, "dim": 2},
              "t_end": 0.3, "text": "The KL decays."},
             {"settings": {"model": "canonical", "beta": 4.0, "n_tokens": 4, "dim": 2},
              "t_end": 0.2}]
    paths = slides.tour_figures(steps, tmp_path / "tour", formats=("png",))
    assert [p.name for p in paths] == ["01_Relaxation_slope_-2_lambda.png", "02_canonical.png"]
    for p in paths:
        assert imread(p).shape[:2] == (1080, 1920)


@pytest.mark.parametrize("step, message", [
    ({"settings": {"beta": -1.0}, "t_end": 1.0}, "(?s)tour step 1: invalid settings:.*beta"),
    ({"settings": {}, "t_end": 0.0}, "tour step 1: t_end must be a positive"),
    ({"settings": {}}, "tour step 1: t_end must be a positive"),
    ("relax", "tour step 1: expected a mapping"),
])
def test_bad_tour_step_is_refused_naming_it(tmp_path, step, message):
    with pytest.raises(ValueError, match=message):
        slides.tour_figures([step], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_curves_a_model_lacks_are_said_not_drawn():
    """A curve the model lacks is said in its plot; a plot whose every curve is ≡ 0 is
    not drawn at all (no empty panel), and said under the slide."""
    settings = Settings(model="value_matching", n_tokens=4, dim=2)
    frames, _ = slides.run_frames(settings, 0.1)
    fig = slides.slide_figure(slides.SlideRun.from_frames(settings, frames))
    ax = fig.slide_axes["kl"]
    assert len(ax.get_lines()) == 1
    assert "tracking bound Σ Bᵢ²/8: n/a for this model" in ax.texts[0].get_text()
    settings = Settings(model="transformer", n_tokens=4, dim=2)
    frames, _ = slides.run_frames(settings, 0.1)
    fig = slides.slide_figure(slides.SlideRun.from_frames(settings, frames))
    assert "kl" not in fig.slide_axes and "rate" not in fig.slide_axes
    assert "the lag Σᵢ KL(Aᵢ‖A*ᵢ): ≡ 0 for this model" in fig.get_supxlabel()
    for ax in fig.axes:
        assert ax.get_lines() or ax.images or ax.collections or not ax.get_visible() \
            or ax.get_label() == "<colorbar>", ax.get_title()


@pytest.mark.slow
def test_comparison_mode_slide_draws_the_distance():
    d = small_dashboard()
    d.compare = True
    play(d, 6)
    fig = slides.dashboard_slide(d)
    (line,) = fig.slide_axes["distance"].get_lines()
    reference = d.reference  # the reduced model's run beside, at the same times
    assert reference.t == pytest.approx(d.sim.t)
    np.testing.assert_array_equal(line.get_xdata(), [f.t for f in d.history])
    assert line.get_ydata()[-1] == pytest.approx(
        np.linalg.norm(d.history[-1].features - reference.frame().features), rel=1e-12)
    assert imread(io.BytesIO(slides.figure_bytes(fig, "png"))).shape[:2] == (1080, 1920)


def test_mid_run_change_is_marked_on_the_time_plots():
    d = small_dashboard()
    play(d, 4)
    d.settings.beta = 4.0  # a continued run: a change at the current time
    play(d, 4)
    (change,) = d.sim.changes
    fig = slides.dashboard_slide(d)
    for key in ("kl", "energy", "rate"):
        ax = fig.slide_axes[key]
        assert [t.get_text() for t in ax.texts if "→" in t.get_text()] == ["β 1 → 4"]
        marker = ax.get_lines()[-1]  # the vertical line, drawn last
        assert list(marker.get_xdata()) == [change.t, change.t]


def test_a_quench_is_applied_and_marked_in_a_tour_slide(tmp_path):
    """A tour step with a quench gets its slide (it was skipped): the run is stepped to
    the quench time, changed there and continued (the protocol work is the jump of H),
    and the change is marked on the slide's time plots."""
    from app import presets as presets_module
    from app.teaching.tour import load_tour, slide_steps

    settings = Settings(model="canonical", n_tokens=5, dim=3)
    frames, sim = slides.run_frames(settings, 0.6, max_frames=5,
                                    quench={"at_t": 0.33, "beta": 3.0})
    (change,) = sim.changes
    assert change.t == pytest.approx(0.33) and sim.settings.beta == 3.0
    assert settings.beta == 1.0  # the caller's settings (a slide's footer) stay the start's
    t = [f.t for f in frames]
    assert t[0] == 0 and t[-1] == pytest.approx(0.6) and any(abs(x - 0.33) < 1e-9 for x in t)
    before = next(f for f in frames if abs(f.t - 0.33) < 1e-9)
    plain, _ = slides.run_frames(Settings(model="canonical", n_tokens=5, dim=3), 0.33)
    np.testing.assert_array_equal(before.features, plain[-1].features)  # the same run until then
    run = slides.SlideRun.from_frames(sim.settings, frames, sim.changes)
    fig = slides.slide_figure(run)
    for key in ("kl", "energy", "rate"):
        assert [x.get_text() for x in fig.slide_axes[key].texts if "→" in x.get_text()] == [
            "β 1 → 3"]
    # every step of the shipped tour is a slide now, its quench step's with the quench
    tour = load_tour()
    steps, skipped = slide_steps(tour, presets_module.load_presets())
    assert [s["quench"] for s in steps if "quench" in s] == [{"at_t": 3.0, "beta": 5.0}]
    assert skipped == [] and len(steps) == len(tour["steps"])
    with pytest.raises(ValueError, match="tour step 1: quench: 'at_t' must be a time"):
        slides.tour_figures([{"settings": {}, "t_end": 1.0, "quench": {"beta": 2.0}}],
                            tmp_path / "bad")


def test_a_lab_step_slide_draws_the_labs_plots(tmp_path):
    """A lab step of a tour gets a 16:9 slide of the lab's six plots (it was skipped):
    T_max and the accelerated blow-up marked at their times, the layers' first crossing,
    the three softmax flows; the settings in the footer; a bad lab setting is refused
    naming the step, nothing written."""
    result = lab_preset_run("momentum delays but does not prevent blow-up")
    fig = slides.lab_slide_figure(result, "Momentum delays the blow-up", "Compare the markers.")
    axes = fig.slide_axes
    marks = {t.get_text() for t in axes["eigenvalues"].texts}
    assert marks == {f"Tₘₐₓ = {result.first_order_time:.3f}",
                     f"blow-up = {result.accelerated_time:.3f}"}
    assert result.first_order_time == pytest.approx(1.0, rel=1e-3)
    vlines = [line.get_xdata()[0] for line in axes["eigenvalues"].get_lines()
              if len(line.get_xdata()) == 2 and line.get_xdata()[0] == line.get_xdata()[1]]
    assert vlines == [result.first_order_time, result.accelerated_time]
    assert [t.get_text() for t in axes["layers"].texts] == [
        f"crossing {result.crossing_layer} (⌈T_θ/h⌉ = {result.predicted_layer})"]
    softmax = axes["softmax"].get_lines()
    assert [line.get_label() for line in softmax] == ["inertial", "momentum", "first_order"]
    np.testing.assert_array_equal(softmax[0].get_ydata(), result.softmax["softmax_inertial"].y)
    assert "alpha = 1.0" in fig.get_supxlabel()
    assert imread(io.BytesIO(slides.figure_bytes(fig, "png"))).shape[:2] == (1080, 1920)
    with pytest.raises(ValueError, match="tour step 1: A diagonal must be"):
        slides.tour_figures([{"lab_settings": {"kernel_diag": "x"}}], tmp_path / "bad")
    assert not (tmp_path / "bad").exists() or list((tmp_path / "bad").iterdir()) == []


# -- issue #27, item 8: slides that show what their captions say ----------------------
def _tour_slide(number, t_end):
    """The slide of the shipped tour's step ``number`` run to ``t_end`` (as
    ``tour_figures`` draws it: maps where they are informative, the step's guides)."""
    from app import presets as presets_module
    from app.teaching.tour import load_tour, slide_steps

    step = slide_steps(load_tour(), presets_module.load_presets())[0][number - 1]
    settings = Settings(**step["settings"])
    frames, sim = slides.run_frames(settings, t_end, quench=step.get("quench"))
    run = slides.SlideRun.from_frames(settings, frames, sim.changes, informative=True)
    return slides.slide_figure(run, caption=step["text"],
                               annotations=step["annotations"]), frames, step


def test_the_relaxation_slide_draws_its_dashed_guide_and_the_relaxation():
    """Step 1's caption names "the dashed guide with slope −2λ": the slide draws it, dashed,
    of slope −2λ on the log axis through the lag after t = 5 (as the page does); its maps
    are taken while A still differs from A* (not at the end, where A = A*), the time said
    in their titles and marked on the time plots."""
    fig, frames, step = _tour_slide(1, 6.0)
    assert "dashed guide" in step["text"] and "kl_slope" in step["annotations"]
    ax = fig.slide_axes["kl"]
    (guide,) = [line for line in ax.get_lines() if line.get_gid() == "kl_slope"]
    assert guide.get_linestyle() == "--"
    t, kl = guide.get_xdata(), guide.get_ydata()
    lam = step["settings"]["gamma"] / step["settings"]["beta"]
    assert (np.log(kl[1]) - np.log(kl[0])) / (t[1] - t[0]) == pytest.approx(-2 * lam, rel=1e-9)
    A = fig.slide_axes["A"].images[0].get_array()
    S = fig.slide_axes["A*"].images[0].get_array()
    assert np.abs(A - S).max() > 0.05  # the relaxation is visible
    last = frames[-1]
    assert np.abs(last.attention - last.softmax).max() < np.abs(A - S).max() / 5
    shown = next(f for f in frames if np.array_equal(f.attention, A))
    assert 0 < shown.t < frames[-1].t
    assert f"t = {shown.t:.3g}" in fig.slide_axes["A"].get_title()
    assert f"t = {shown.t:.3g}" in fig.slide_axes["A*"].get_title()
    assert any(list(line.get_xdata()) == [shown.t, shown.t] for line in ax.get_lines())


def test_the_sphere_slide_shows_the_clustering_not_empty_or_unbounded_panels():
    """The sphere's slide: no empty "≡ 0" panels (lag, dissipation rate), no "energy
    balance" of a model without one; the interaction energy under its maximum N²eᵝ/(2β)
    and the cluster count falling; its two maps are the attention at the start and at the
    end (A = A* for this model)."""
    from dynamics import clustering as cl

    fig, frames, step = _tour_slide(13, 3.0)  # at large β: metastable clusters
    axes = fig.slide_axes
    assert step["settings"]["model"] == "sphere"
    assert not {"kl", "rate", "energy", "A*"} & set(axes)
    (energy, maximum) = axes["interaction"].get_lines()
    n, beta = frames[0].features.shape[0], step["settings"]["beta"]
    top = cl.max_interaction_energy(n, beta)
    assert maximum.get_ydata()[0] == pytest.approx(top)
    e = energy.get_ydata()
    assert np.all(e <= top * (1 + 1e-9)) and e[-1] > e[0]
    np.testing.assert_allclose(e, [f.diagnostics["hamiltonian"] for f in frames])
    counts = axes["clusters"].get_lines()[0].get_ydata()
    assert counts[0] > counts[-1] >= 1
    np.testing.assert_array_equal(axes["A"].images[0].get_array(), frames[0].attention)
    np.testing.assert_array_equal(axes["A end"].images[0].get_array(), frames[-1].attention)
    assert "Not drawn" in fig.get_supxlabel()


def test_slide_file_names_keep_greek_letters_and_decimals(tmp_path):
    paths = slides.tour_figures(
        [{"title": "At large β, clusters wait", "settings": {"n_tokens": 3, "dim": 2},
          "t_end": 0.05},
         {"title": "β = 2.5. A quench", "settings": {"n_tokens": 3, "dim": 2},
          "t_end": 0.05}], tmp_path, formats=("png",))
    assert [p.name for p in paths] == ["01_At_large_beta_clusters_wait.png",
                                       "02_beta_2.5_A_quench.png"]
    assert slides.slide_stem("β quench at t = 3") == "beta_quench_at_t_3"


def test_the_momentum_step_slide_draws_the_base_case(tmp_path):
    """The lab's first preset (momentum on a quadratic) gets its own slide: f − f* of every
    run on log–log axes with the 1/t² guide, and the paths of token 1; through
    tour_figures as well."""
    from app.lab.inertial_lab import load_presets

    preset = load_presets()[0][0]
    assert preset["name"] == "Momentum on a quadratic"
    result = lab_preset_run(preset["name"])
    fig = slides.momentum_slide_figure(result, caption=preset["caption"])
    gap, path = fig.slide_axes["gap"], fig.slide_axes["path"]
    assert gap.get_xscale() == gap.get_yscale() == "log"
    lines = {line.get_label(): line for line in gap.get_lines()}
    assert set(lines) == {run.label for run in result.runs.values()} | {"(r−1)²|x₀|²/(2t²)"}
    nesterov = result.runs["nesterov"]
    np.testing.assert_array_equal(lines[nesterov.label].get_ydata(), nesterov.gap_curve().y)
    np.testing.assert_array_equal(path.get_lines()[-1].get_xdata(), nesterov.path().x)
    assert "nesterov_t0 = 0.0" in fig.get_supxlabel()
    written = slides.tour_figures([{"title": "Momentum first", "text": "A ball in a bowl.",
                                    "lab_settings": preset["settings"]}], tmp_path,
                                   formats=("png",))
    assert [p.name for p in written] == ["01_Momentum_first.png"]
    assert imread(written[0]).shape[:2] == (1080, 1920)


# -- issue #35, item 8 -----------------------------------------------------------------
def test_the_real_head_slide_names_the_words_the_text_speaks_of():
    """Slide 2's text speaks of the row of 'it' and the column of 'animal': the maps'
    axes carry the sentence's words, not the numbers 0–15."""
    fig, frames, step = _tour_slide(2, 0.5)
    assert "‘it’" in step["text"] and "‘animal’" in step["text"]
    words = list(frames[-1].tokens)
    for key in ("A", "A*"):
        ax = fig.slide_axes[key]
        x = [t.get_text() for t in ax.get_xticklabels()]
        y = [t.get_text() for t in ax.get_yticklabels()]
        assert x == words and y == words and "it" in x and "animal" in y


def test_the_slide_caption_leaves_out_the_pages_navigation_link():
    """The sidebar's slide takes the page's caption, which ends with an in-app link
    "Theory page: … ▸": a link on the page, not text of a slide."""
    from app import Dashboard
    from app import presets as presets_module

    d = Dashboard(playing=False)
    d.__panel__()
    d.load_preset(presets_module.load_presets()[0])
    assert "Theory page:" in d.caption.object
    text = slides.plain_caption(d.caption.object)
    assert "Theory page" not in text and "▸" not in text
    assert text.startswith("Relaxation to softmax (fixed features) — At fixed features")
    assert "(tracking the moving softmax)" in text  # a link inside the sentence stays


def test_the_lab_slides_hamiltonian_axis_has_no_offset_label():
    """The Hamiltonian varies by ~1e-5 around −0.5: its axis reads the values, not a
    multiplier and an offset ("1e−5−5e−1") above the plot."""
    from app.lab.inertial_lab import load_presets

    for preset in load_presets()[0]:
        if preset["settings"].get("model") == "momentum_quadratic":
            continue
        result = lab_preset_run(preset["name"])
        fig = slides.lab_slide_figure(result, preset["name"])
        fig.savefig(io.BytesIO(), format="png", dpi=40)  # lays the ticks out
        ax = fig.slide_axes["hamiltonian"]
        assert ax.yaxis.get_offset_text().get_text() == "", preset["name"]
