"""Browser tier: the smaller items of issue #13 (item 8) on the served page.

A click on a checkbox's label toggles it; the status shows no frame rate while paused;
the main run sends no frames while the inertial lab is shown, and goes on when the
main tab is shown again.
"""

import re

import pytest
from serving import COUNT_CHANGES

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Whether the plot titled ``(title)`` is shown.
SHOWN = """
(title) => [...Bokeh.documents[0]._all_models.values()].some(
    m => m.title && m.title.text === title && m.visible)
"""


def test_labels_pause_and_tabs(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    linear = "Attention lag Σᵢ KL(Aᵢ‖A*ᵢ)"
    assert not page.evaluate(SHOWN, linear)
    page.get_by_text("Logarithmic KL axis", exact=True).click()  # the label, not the box
    page.wait_for_function(f"() => ({SHOWN})({linear!r})", timeout=10000)
    page.get_by_text("Compare with the reduced model", exact=True).click()
    page.wait_for_function(
        f"() => ({SHOWN})('Distance to the reduced (softmax-slaved) model')", timeout=10000)
    # the main run waits while the lab is shown
    assert page.evaluate(COUNT_CHANGES, 1000) > 0
    page.get_by_text("Inertial lab", exact=True).click()
    page.get_by_text("first-order T_max").first.wait_for(timeout=30000)
    page.wait_for_timeout(500)
    assert page.evaluate(COUNT_CHANGES, 1500) == 0
    page.get_by_text("Nonequilibrium attention", exact=True).click()
    assert page.evaluate(COUNT_CHANGES, 1500) > 0
    # paused: no frame rate in the status
    page.get_by_role("button", name=re.compile("Play")).click()
    status = page.get_by_text("❚❚ paused").first
    status.wait_for(timeout=10000)
    assert "frames/s" not in status.inner_text()
    assert console_errors == []
