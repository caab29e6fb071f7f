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
    page.get_by_role("button", name="Run").first.click()
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
