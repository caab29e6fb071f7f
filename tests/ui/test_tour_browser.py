"""Browser tier (issue #16, items 1–2): a class opened at a tour step by its link, in
projector mode on a 1280×720 projector — five plots in large type, nothing to scroll,
the arrow keys move through the tour."""

import re

import pytest
from pixels import assert_plots_show_data
from test_layout_browser import PLOT_BOXES, _overlaps

pytestmark = [pytest.mark.ui, pytest.mark.slow]


def test_a_link_opens_the_tour_at_a_step_in_projector_mode(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(server + "?tour_step=4&projector=true")
        page.get_by_text("Tour 4/21: A moving target").wait_for(timeout=60000)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_timeout(2000)
        boxes = page.evaluate(PLOT_BOXES)
        assert len(boxes) == 5, boxes  # A beside A*, the tokens, the lag, the energy
        # drawn, not only placed: each of the five shows data (issue #35)
        assert_plots_show_data(page, at_least=5)
        for i, a in enumerate(boxes):
            assert a["x"] + a["w"] <= 1280 and a["y"] + a["h"] <= 720, a
            assert not any(_overlaps(a, b) for b in boxes[i + 1:])
        size = page.evaluate("[document.documentElement.scrollWidth,"
                             " document.documentElement.scrollHeight]")
        assert size[0] <= 1280 and size[1] <= 720, size
        page.screenshot(path="/tmp/tour_projector.png")
        page.keyboard.press("ArrowRight")
        page.get_by_text("Tour 5/21: When the target settles").wait_for(timeout=30000)
        # the step is in the URL (a link to it), pushed once its preset has loaded: the
        # banner may show the step a moment before
        page.wait_for_url(re.compile(r"tour_step=5\b"), timeout=30000)
        page.keyboard.press("ArrowLeft")
        page.get_by_text("Tour 4/21").wait_for(timeout=30000)
        assert errors == []
    finally:
        context.close()


def test_a_link_to_a_lab_step_goes_back_and_ends_the_tour(browser, server):
    """Issue #35, item 5: opened by its link at a lab step, Back moved the banner to 17
    while the URL stayed at 18, and End tour did nothing (16, 18, 21). Back moves the
    URL with the banner, End tour hides the banner and takes the step out of the URL,
    and the lab's plots show data on the way."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(server + "?tour_step=18")
        page.get_by_text("Tour 18/21").wait_for(timeout=60000)
        page.get_by_role("button", name="◀ Back").click()
        page.get_by_text("Tour 17/21").wait_for(timeout=30000)
        page.wait_for_url(re.compile(r"tour_step=17\b"), timeout=30000)
        page.wait_for_function("() => !/tour_step=18/.test(location.search)", timeout=5000)
        assert_plots_show_data(page, at_least=1)  # the lab step's own plots
        page.get_by_role("button", name="End tour").click()
        page.get_by_text("Tour 17/21").wait_for(state="hidden", timeout=30000)
        page.wait_for_function("() => !/tour_step=/.test(location.search)", timeout=30000)
        assert errors == []
    finally:
        context.close()


#: Page script: count the layouts of the whole page (a root layout's ``compute_layout``)
#: from now on, in ``window.__root_layouts``.
COUNT_ROOT_LAYOUTS = """
() => {
  const { LayoutDOMView } = Bokeh.require("models/layouts/layout_dom");
  const compute = LayoutDOMView.prototype.compute_layout;
  window.__root_layouts = 0;
  const busy = new Set();  // (a subclass's compute_layout calls this one again by super)
  LayoutDOMView.prototype.compute_layout = function (...args) {
    if (busy.has(this)) return compute.apply(this, args);
    if (!(this.parent instanceof LayoutDOMView)) window.__root_layouts += 1;
    busy.add(this);
    try {
      return compute.apply(this, args);
    } finally {
      busy.delete(this);
    }
  };
}
"""


def test_a_tour_step_lays_the_page_out_once(browser, server):
    """A step changes the visibility of two dozen panels, plots and widgets: the page
    laid itself out again for each (about 30 layouts of the whole page, 8–12 s of a core
    before the step showed: a lecturer clicking Next waited that long). The server sends
    the step as one message and the page lays out once per message
    (``app.serving.one_layout``): a handful of layouts (counted: every layout of the
    whole page, whichever view asks for it), the step shown within seconds."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(server + "?tour_step=13&steps_per_frame=160")
        page.get_by_text("Tour 13/21").wait_for(timeout=60000)
        page.get_by_text(re.compile(r"^■ t = ")).first.wait_for(timeout=60000)
        page.evaluate(COUNT_ROOT_LAYOUTS)
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_text("Tour 14/21").wait_for(timeout=60000)
        page.get_by_text(re.compile(r"^■ t = ")).first.wait_for(timeout=60000)
        layouts = page.evaluate("() => window.__root_layouts")
        assert 1 <= layouts <= 14, layouts  # (measured: 36 without the batching, 9 with)
        assert_plots_show_data(page, at_least=2)  # laid out: drawn, with data
    finally:
        context.close()
