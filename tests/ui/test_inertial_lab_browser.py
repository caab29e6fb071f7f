"""Browser tier: the Inertial lab tab renders and responds (marker ``ui``)."""

import re

import pytest

pytestmark = pytest.mark.ui


def _status(page):
    return page.get_by_text(re.compile(r"first-order T_max")).first.inner_text()


@pytest.mark.slow
def test_inertial_lab_renders_and_responds(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Inertial lab").first.click()
    # the lab is built on first show: 90 s on a loaded machine
    page.get_by_role("button", name="Run").first.click(timeout=90000)
    page.get_by_text(re.compile(r"first-order T_max = 1\.000")).first.wait_for(timeout=30000)
    # the lab's plots (eigenvalues, cloud, layers, clouds, Hamiltonian, softmax) render
    assert page.locator(".bk-Canvas").count() >= 7 + 6
    assert "T_max = 1.000" in _status(page)  # 1/(2 a v s) with a = v = 1, s = 1/2

    # responds: V = 2 halves the first-order blow-up time
    field = page.get_by_role("textbox").nth(1)
    field.fill("2")
    field.press("Enter")
    page.get_by_role("button", name="Run").first.click()
    page.get_by_text(re.compile(r"first-order T_max = 0\.500")).first.wait_for(timeout=30000)
    assert "T_max = 0.500" in _status(page)
    assert console_errors == []


#: The y range of the plot titled ``(title)``.
Y_RANGE = """
(title) => {
  const plot = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.title && m.title.text === title && m.y_range);
  return [plot.y_range.start, plot.y_range.end];
}
"""


@pytest.mark.slow
def test_inertial_lab_opens_on_a_run_with_its_equations(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Inertial lab", exact=True).click()
    # the first preset has run: no click on Run
    page.get_by_text(re.compile(r"first-order T_max = 1\.000")).first.wait_for(timeout=90000)
    link = page.get_by_role("link", name="Theory page: Accelerated linear attention ▸")
    link.scroll_into_view_if_needed()
    assert page.locator(".katex-html").count() > 5  # the Part II equations, by KaTeX
    # nearly constant eigenvalues (V ⪯ 0) on a log axis of whole decades
    page.locator("select:visible").first.select_option(label="V ⪯ 0: global existence")
    page.wait_for_function(f"() => ({Y_RANGE})('Eigenvalues of S(t) (one line each)')[1] == 10",
                           timeout=30000)
    assert page.evaluate(Y_RANGE, "Eigenvalues of S(t) (one line each)") == [0.1, 10]
    # the equations link to their section of the Theory page
    link.click()
    page.get_by_role("heading", name="Accelerated linear attention").wait_for(timeout=15000)
    assert console_errors == []


@pytest.mark.slow
def test_the_lab_runs_an_uploaded_file(page, server, console_errors, tmp_path):
    """A weights file with X, A, V chosen in the page's file input: the lab runs it (the
    first-order T_max is then numerical: 1/(2·2·1·0.5) = 0.5 for A = 2I, V = I, S(0) = I/2)
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
    page.get_by_text(re.compile(r"first-order T_max = 1\.000")).first.wait_for(timeout=90000)
    page.locator("input[type=file]:visible").first.set_input_files(str(path))
    page.get_by_text(re.compile(r"first-order T_max = 0\.500 \(numerical\)")).first.wait_for(
        timeout=30000)
    assert page.get_by_text(re.compile(r"Running mine\.npz.*N = 20, d = 2")).count() >= 1
    page.get_by_role("button", name="Back to generated data").click()
    page.get_by_text(re.compile(r"first-order T_max = 1\.000;")).first.wait_for(timeout=30000)
    assert console_errors == []
