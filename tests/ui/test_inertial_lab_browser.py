"""Browser tier: the Inertial lab tab renders and responds (marker ``ui``)."""

import re
import time

import pytest
from pixels import (
    MIN_PIXELS,
    assert_fits_viewport,
    assert_no_sideways_scroll,
    assert_plots_show_data,
    plots_data,
)

from app.lab.inertial_lab import load_presets

pytestmark = pytest.mark.ui


def _status(page):
    return page.get_by_text(re.compile(r"first-order Tₘₐₓ")).first.inner_text()


#: The y range of the plot titled ``(title)``.
Y_RANGE = """
(title) => {
  const plot = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.title && m.title.text === title && m.y_range);
  // (a plot not shown yet is not in the document: the lab lays out the run's plots only)
  return plot ? [plot.y_range.start, plot.y_range.end] : [null, null];
}
"""


@pytest.mark.slow
def test_the_lab_runs_an_uploaded_file(page, server, console_errors, tmp_path):
    """A weights file with X, A, V chosen in the page's file input: the lab runs it (the
    first-order Tₘₐₓ is then numerical: 1/(2·2·1·0.5) = 0.5 for A = 2I, V = I, S(0) = I/2)
    and goes back to its generated data on request."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 2))
    X = X @ np.linalg.inv(np.linalg.cholesky(X.T @ X / 20)).T * np.sqrt(0.5)  # S(0) = I/2
    path = tmp_path / "mine.npz"
    np.savez(path, X=X, A=2 * np.eye(2), V=np.eye(2))
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Inertial lab", exact=True).click()
    page.get_by_text(re.compile(r"f − f\* at t = 100")).first.wait_for(timeout=90000)
    # a file runs the attention experiments (the base case has no file); its input is in
    # the sidebar's group "Your own data"
    page.get_by_text("Your own data (.npz)").click()
    page.locator("input[type=file]:visible").first.set_input_files(str(path))
    page.get_by_text(re.compile(r"first-order Tₘₐₓ = 0\.500 \(numerical\)")).first.wait_for(
        timeout=30000)
    assert page.get_by_text(re.compile(r"Running mine\.npz.*N = 20, d = 2")).count() >= 1
    page.get_by_role("button", name="Back to generated data").click()
    page.get_by_text(re.compile(r"first-order Tₘₐₓ = 1\.000;")).first.wait_for(timeout=30000)
    assert console_errors == []


#: What the page draws of the plot titled ``(title)``: its ranges, axis types, and the
#: number of points of each line.
PLOT = """
(title) => {
  const plot = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.title && typeof m.title.text === "string" && m.title.text.startsWith(title)
           && m.y_range);
  const lines = plot.renderers.filter(r => r.data_source && r.data_source.data.t)
      .map(r => r.data_source.data.t.length);
  return {x: [plot.x_range.start, plot.x_range.end], y: [plot.y_range.start, plot.y_range.end],
          axes: [plot.below.find(a => a.ticker).type, plot.left[0].type],
          lines: lines, title: plot.title.text, visible: plot.visible};
}
"""


@pytest.mark.slow
def test_the_lab_opens_on_the_base_case_with_its_equations_and_responds(
        page, server, console_errors):
    """Issue #29, done when: the page shows momentum on a quadratic from its preset —
    f − f* of the gradient flow, two heavy balls and Nesterov on log–log axes with the
    1/t² guide, and the paths of a token in the ill-conditioned bowl a = (1, 0.01). The
    first preset has run as the lab opens (no click on Run); the Part II equations are
    drawn; a preset and a changed setting run on Run; the equations link to their section
    of the Theory page. One page load (and one lab built) for all of it."""
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Inertial lab", exact=True).click()
    # the lab is built on first show (90 s on a loaded machine), on the base case
    status = page.get_by_text(re.compile(r"f − f\* at t = 100")).first
    status.wait_for(timeout=90000)
    text = status.inner_text()
    assert "Nesterov is below the gradient flow and heavy ball α = 2 from t = 12" in text
    assert "under (r − 1)²|x₀|²/(2t²) at every frame" in text
    assert page.get_by_text(re.compile(r"Momentum on a quadratic — The base case")).count()
    gap = page.evaluate(PLOT, "Momentum on a quadratic: f − f*")
    assert gap["axes"] == ["LogAxis", "LogAxis"] and gap["x"] == [0.1, 100]
    # four runs at t = 0.1 … 100, and the guide where it is below f(x₀) − f* (t ≥ 2.9)
    assert gap["lines"][:4] == [1000] * 4 and 950 < gap["lines"][4] < 1000
    lo, hi = gap["y"]
    assert lo == 1e-9 and hi == 1
    path = page.evaluate(PLOT, "Path of token 1 in the plane")
    assert path["title"] == "Path of token 1 in the plane (a = 1, 0.01)"  # x₁, x₂ order
    link = page.get_by_role("link", name="Theory page: Accelerated linear attention ▸")
    link.scroll_into_view_if_needed()
    assert page.locator(".katex-html").count() > 5  # the Part II equations, by KaTeX

    # responds: a preset runs on Run, and V = 2 halves the first-order blow-up time
    page.locator("select:visible").first.select_option(
        label="first-order blow-up at 1/(2 a v s)")
    page.get_by_role("button", name="Run").first.click()
    page.get_by_text(re.compile(r"first-order Tₘₐₓ = 1\.000")).first.wait_for(timeout=30000)
    # the lab's plots (eigenvalues, cloud, layers, clouds, Hamiltonian, softmax) render
    assert page.locator(".bk-Canvas").count() >= 7 + 6
    assert "Tₘₐₓ = 1.000" in _status(page)  # 1/(2 a v s) with a = v = 1, s = 1/2
    field = page.get_by_role("textbox").nth(1)
    field.fill("2")
    field.press("Enter")
    page.get_by_role("button", name="Run").first.click()
    page.get_by_text(re.compile(r"first-order Tₘₐₓ = 0\.500")).first.wait_for(timeout=30000)
    assert "Tₘₐₓ = 0.500" in _status(page)

    # no blow-up (V ⪯ 0): to t = 10, one eigenvalue decays, one stays 1; whole decades
    page.locator("select:visible").first.select_option(label="V ⪯ 0: global existence")
    page.get_by_text(re.compile(r"first-order Tₘₐₓ = ∞")).first.wait_for(timeout=30000)
    page.wait_for_function(f"() => ({Y_RANGE})('Eigenvalues of S(t) (one line each)')[1] == 10",
                           timeout=30000)
    assert page.evaluate(Y_RANGE, "Eigenvalues of S(t) (one line each)") == [0.01, 10]
    # the equations link to their section of the Theory page
    link.click()
    page.get_by_role("heading", name="Accelerated linear attention").wait_for(timeout=15000)
    assert console_errors == []


def _drawn(page, plots: int, timeout_s: float = 60.0) -> dict[str, int]:
    """Wait until ``plots`` plots are visible and every one shows data (a run's data
    reach the page a moment after its caption); then assert it by pixels."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        counts = plots_data(page)
        if len(counts) >= plots and min(counts.values()) >= MIN_PIXELS:
            break
        page.wait_for_timeout(250)  # (polling a condition: the pixels drawn)
    return assert_plots_show_data(page, at_least=plots)


def _choose(page, name: str) -> None:
    """Choose the lab's preset ``name`` (its menu is the first one visible)."""
    page.locator("select:visible").first.select_option(label=name)
    page.get_by_text(re.compile(re.escape(f"{name} —"))).first.wait_for(
        state="attached", timeout=60000)


@pytest.mark.slow
def test_every_lab_preset_draws_its_plots_and_fits_a_projector(page, server, console_errors):
    """Issue #35, items 1, 2 and 6: every preset's plots show drawn data (pixels, not
    canvases) at 1280×720 and at 1920×1080 — the base case's two used to have frames of
    zero size, the Hamiltonian an empty panel after the tour came from the base case —
    and in projector mode a preset shows its own plots only, with data, and the lab
    fits 1280×720 (it was 2,235 px tall). One page load for all of it."""
    presets, _ = load_presets()
    small, large = {"width": 1280, "height": 720}, {"width": 1920, "height": 1080}
    page.set_viewport_size(small)
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Inertial lab", exact=True).click()
    page.get_by_text(re.compile(r"f − f\* at t = 100")).first.wait_for(timeout=90000)
    for i, preset in enumerate(presets):
        if i:
            _choose(page, preset["name"])
        plots = 2 if preset["settings"]["model"] == "momentum_quadratic" else 6
        # 1280×720 for the base case; the lecture walk (test_lecture_browser.py) sees
        # every lab step at 1280×720 too, so the other presets are checked at 1920×1080
        for size in ((small, large) if i == 0 else (large,)):
            page.set_viewport_size(size)
            counts = _drawn(page, plots)
            assert len(counts) == plots, (preset["name"], counts)
            assert_no_sideways_scroll(page)
        page.set_viewport_size(small)
    # the sidebar: the preset and Run first, the rest in groups (collapsed)
    assert page.get_by_text("Tokens, matrices and time step").count() == 1
    assert not page.get_by_text("Seed", exact=False).first.is_visible()

    page.get_by_role("button", name="Projector mode").click()
    toggle = page.get_by_role("button", name="☰ Lab controls")
    toggle.wait_for(timeout=120000)  # (a minute on a loaded machine)
    # its own plots: two (the Hamiltonian beside the eigenvalues), one, the base case's
    chosen = [p for p in presets if p["name"].startswith(("V ⪯ 0", "softmax"))]
    for preset in (*chosen, presets[0]):
        toggle.click()  # the lab's controls: a drawer over the plots
        _choose(page, preset["name"])
        toggle.click()
        page.locator("select:visible").first.wait_for(state="hidden", timeout=10000)
        counts = _drawn(page, len(preset["focus"]))
        assert len(counts) == len(preset["focus"]), (preset["name"], counts)
        page.evaluate("window.scrollTo(0, 0)")
        assert_fits_viewport(page)
    assert console_errors == []
