"""Browser tier (issue #27, the teaching items): the tour leaves a focused widget its
arrow keys; the URL names the step shown, with that step's settings, and forgets the tour
when it ends; projector mode on a 1280×720 projector keeps A beside A*, with nothing cut,
overlapping or reflowed."""

import re

import pytest
from pixels import assert_plots_show_data
from test_layout_browser import PLOT_BOXES, _overlaps

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


#: The plots shown whose toolbar is drawn (above the plot, where it covered the title).
TOOLBARS_SHOWN = """
() => [...Bokeh.index.all_views()]
  .filter(v => v.model.toolbar !== undefined && v.model.toolbar_location != null && v.el
               && v.el.checkVisibility({visibilityProperty: true})
               && v.el.getBoundingClientRect().width > 0)
  .map(v => v.model.title ? String(v.model.title.text) : "")
"""


def _fits(page, boxes, width=1280, height=720):
    for i, a in enumerate(boxes):
        assert a["x"] >= 0 and a["x"] + a["w"] <= width, a
        assert a["y"] + a["h"] <= height, a  # a plot with its legend below it
        assert not any(_overlaps(a, b) for b in boxes[i + 1:]), (a, boxes)
    size = page.evaluate("[document.documentElement.scrollWidth,"
                         " document.documentElement.scrollHeight]")
    assert size[0] <= width and size[1] <= height, size


def test_projector_mode_shows_a_beside_a_star_and_fits_with_the_tour(browser, server):
    """1280×720 with the tour's banner (its longest step on the main tab): A(t) beside
    A*(t), the tokens, the lag and the energy balance, all with their legends inside the
    window; no toolbar over a title; no developer status line; "☰ Controls" opens a
    drawer over the plots, which keep their places (no reflow into one column)."""
    context, page, errors = _new_page(browser)
    try:
        page.goto(server + "?tour_step=6&projector=true")
        page.get_by_text("Tour 6/").wait_for(timeout=60000)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_timeout(2500)
        boxes = page.evaluate(PLOT_BOXES)
        titles = [b["title"] for b in boxes]
        assert len(boxes) == 5, titles
        # drawn, not only placed: each of the five shows data (issue #35)
        assert_plots_show_data(page, at_least=5)
        assert any(t.startswith("Attention A(t)") for t in titles), titles
        assert any(t.startswith("Softmax A*(t)") for t in titles), titles
        a, a_star = (next(b for b in boxes if b["title"].startswith(p))
                     for p in ("Attention A(t)", "Softmax A*(t)"))
        assert abs(a["y"] - a_star["y"]) < 2 and a["x"] < a_star["x"]  # side by side
        _fits(page, boxes)
        assert page.evaluate(TOOLBARS_SHOWN) == []
        assert not page.get_by_text(re.compile("ms/tick")).first.is_visible()
        page.screenshot(path="/tmp/teaching_projector_tour_1280.png")
        page.get_by_role("button", name="☰ Controls").click()
        page.get_by_role("button", name="↺ Replay from A(0)").wait_for(timeout=10000)
        page.wait_for_timeout(1500)
        opened = page.evaluate(PLOT_BOXES)
        assert [(round(b["x"]), round(b["y"])) for b in opened] == [
            (round(b["x"]), round(b["y"])) for b in boxes]
        _fits(page, opened)
        page.screenshot(path="/tmp/teaching_projector_controls_1280.png")
        page.get_by_role("button", name="☰ Controls").click()  # closes it again
        page.get_by_role("button", name="↺ Replay from A(0)").wait_for(state="hidden",
                                                               timeout=10000)
        assert errors == []
    finally:
        context.close()


def test_projector_mode_uses_a_full_hd_projector(browser, server):
    """1920×1080: the same five plots scaled to the window (they stayed at their 1280×720
    size, in the left two thirds), nothing cut, overlapping or scrolling."""
    context, page, errors = _new_page(browser, 1920, 1080)
    try:
        page.goto(server + "?tour_step=6&projector=true")
        page.get_by_text("Tour 6/").wait_for(timeout=60000)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_function(f"() => Math.max(...({PLOT_BOXES})().map(b => b.x + b.w)) > 1700",
                               timeout=60000)
        page.wait_for_timeout(1500)
        boxes = page.evaluate(PLOT_BOXES)
        assert len(boxes) == 5, boxes
        _fits(page, boxes, 1920, 1080)
        page.screenshot(path="/tmp/teaching_projector_tour_1920.png")
        assert errors == []
    finally:
        context.close()
