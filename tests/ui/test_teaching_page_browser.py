"""Browser tier (issue #27, the teaching items): the tour leaves a focused widget its
arrow keys; the URL names the step shown, with that step's settings, and forgets the tour
when it ends; projector mode on a 1280×720 projector keeps A beside A*, with nothing cut,
overlapping or reflowed."""

import re

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Every URL the page pushes to the browser's history (Panel's Location uses pushState).
RECORD_URLS = """
window.__urls = [];
const push = history.pushState.bind(history);
history.pushState = (state, title, url) => {
  window.__urls.push(String(url));
  push(state, title, url);
};
"""


def _new_page(browser, width=1280, height=720):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return context, page, errors


def _step(url: str):
    found = re.search(r"[?&]tour_step=(\d+)", url)
    return int(found[1]) if found else None


def test_a_focused_slider_keeps_its_arrow_keys(browser, server):
    """With the β slider's handle focused, → moves β, not the tour; once the focus is
    back on the page (a click on the tour's text), → moves the tour again."""
    context, page, errors = _new_page(browser)
    try:
        page.goto(server + "?tour_step=1")
        page.get_by_text("Tour 1/").wait_for(timeout=60000)
        page.wait_for_selector(".noUi-handle", timeout=60000)
        title = page.locator(".bk-slider-title").nth(1)
        assert "β" in title.inner_text()
        handle = page.locator(".noUi-handle").nth(1)
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => window.location.search.includes('beta=')",
                               timeout=20000)
        assert float(re.search(r"beta=([0-9.]+)", page.url)[1]) > 2.0  # β moved up
        page.wait_for_timeout(1500)  # a moved tour would have shown its step by now
        assert page.get_by_text("Tour 1/").count() == 1
        assert page.get_by_text("Tour 2/").count() == 0 and _step(page.url) == 1
        page.locator(".tour-text").click()  # the focus leaves the slider
        page.keyboard.press("ArrowRight")
        page.get_by_text("Tour 2/").wait_for(timeout=30000)
        assert errors == []
    finally:
        context.close()


def test_the_url_follows_the_tour_and_forgets_it_at_the_end(browser, server):
    """Each Next pushes one URL: the step shown with its own settings (no URL pairs a step
    with the settings of the step before it); End removes tour_step, so a reload opens
    the page without the tour."""
    context, page, errors = _new_page(browser)
    page.add_init_script(RECORD_URLS)
    try:
        page.goto(server + "?tour_step=3")
        page.get_by_text("Tour 3/").wait_for(timeout=60000)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_timeout(1500)  # step 3's preset: noise on the logits
        page.evaluate("window.__urls = []")
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_text("Tour 4/").wait_for(timeout=30000)
        page.wait_for_function("() => window.location.search.includes('tour_step=4')",
                               timeout=30000)
        page.wait_for_function("() => window.location.search.includes('omega=')",
                               timeout=30000)  # step 4: the rotating features
        page.wait_for_timeout(1000)
        urls = page.evaluate("window.__urls")
        assert all(_step(u) == 4 for u in urls), urls
        assert not any("logit_noise" in u for u in urls), urls  # step 3's settings
        page.keyboard.press("ArrowRight")
        page.get_by_text("Tour 5/").wait_for(timeout=30000)
        page.wait_for_function("() => window.location.search.includes('tour_step=5')",
                               timeout=30000)
        page.get_by_role("button", name="End tour").click()
        page.wait_for_function("() => !window.location.search.includes('tour_step')",
                               timeout=30000)
        assert "settle_rate" in page.url  # the settings shown stay in the URL
        page.reload()
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_timeout(2000)
        assert not page.get_by_role("button", name="End tour").is_visible()
        assert errors == []
    finally:
        context.close()
