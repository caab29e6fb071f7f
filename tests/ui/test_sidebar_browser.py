"""Browser tier: what a newcomer meets first (issue #27, "one story").

At 1280×720 the sidebar shows at most a dozen controls, the essentials inside the
window without scrolling, the rest in titled groups that open on a click; at 1920×1080
the plots fill the width; Replay runs the relaxation again from A(0).
"""

import re

import pytest
from helpers import open_group
from test_layout_browser import PLOT_BOXES

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: The sidebar's controls shown (buttons, inputs, menus, sliders), outside closed groups.
VISIBLE_CONTROLS = """
() => {
  const seen = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) walk(el.shadowRoot);
      const tag = el.tagName;
      const control = tag === 'BUTTON' || tag === 'SELECT' || tag === 'TEXTAREA'
        || (tag === 'INPUT' && el.type !== 'hidden') || el.classList.contains('noUi-handle');
      if (!control || el.classList.contains('card-header')) continue;
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && r.left < 300 && el.checkVisibility()) {
        seen.push({tag, text: (el.innerText || el.value || '').slice(0, 30),
                   bottom: r.bottom});
      }
    }
  };
  walk(document);
  return seen;
}
"""


def _open(page, url, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(url)
    page.wait_for_selector(".bk-Canvas", timeout=60000)
    page.wait_for_timeout(1500)


def test_a_dozen_controls_first_the_rest_in_groups(page, server, console_errors):
    _open(page, server, 1280, 720)
    shown = page.evaluate(VISIBLE_CONTROLS)
    # (the sidebar is 300 px wide: the controls left of it are its own)
    assert 6 <= len(shown) <= 12, shown
    assert max(c["bottom"] for c in shown) <= 720, shown  # no scrolling to reach them
    assert page.get_by_text("Replay from A(0)").is_visible()
    assert not page.get_by_text("N (tokens)").first.is_visible()
    open_group(page, "Tokens and initial state")
    page.get_by_text("N (tokens)").first.wait_for(state="visible", timeout=10000)
    assert console_errors == []


def test_the_plots_fill_a_wide_screen(page, server, console_errors):
    _open(page, server, 1920, 1080)
    boxes = page.evaluate(PLOT_BOXES)
    right = max(b["x"] + b["w"] for b in boxes)
    assert right >= 1850, boxes  # it was 1684 px: a blank band of 236 px
    assert right <= 1920
    assert console_errors == []


def test_replay_runs_again_from_the_start(page, server, console_errors):
    _open(page, server, 1280, 720)
    status = page.get_by_text("frames/s").first

    def t_now():
        return float(re.search(r"t = ([\d.]+)", status.inner_text()).group(1))

    for _ in range(600):
        if t_now() >= 2:
            break
        page.wait_for_timeout(100)
    assert t_now() >= 2
    page.get_by_role("button", name="Replay from A(0)").click()
    page.wait_for_timeout(300)
    assert t_now() < 1.5, status.inner_text()
    assert "playing" in status.inner_text()
    assert console_errors == []
