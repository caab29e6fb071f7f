"""Browser tier: the page at common screen sizes (issue #13, item 3).

At 1920×1080, 1440×900, 1280×720 (a projector) and 1024×768: no plot is drawn over
another (their bounding boxes do not overlap), nothing needs horizontal scrolling
(``scrollWidth`` ≤ the window's width), and the controls stay usable (inside the
window, beside the plots, and the sidebar can be hidden) — on the main tab and on the
inertial lab; and every plot shown on the main tab draws its data on the screen (a plot
squeezed to nothing counts as blank).
"""

import pytest
from helpers import open_group
from pixels import assert_no_sideways_scroll, assert_plots_show_data
from serving import LAB_BUILT

pytestmark = [pytest.mark.ui, pytest.mark.slow]

SIZES = ((1920, 1080), (1440, 900), (1280, 720), (1024, 768))

#: Bounding boxes of the plots shown (Bokeh plot views visible, of non-zero size: the
#: plots of the tabs not shown are laid out but hidden).
PLOT_BOXES = """
() => [...Bokeh.index.all_views()]
  .filter(v => v.model.x_range !== undefined && v.model.toolbar !== undefined && v.el
               && v.el.checkVisibility({visibilityProperty: true}))
  .map(v => { const r = v.el.getBoundingClientRect();
              return {title: v.model.title ? String(v.model.title.text) : "",
                      x: r.left + window.scrollX, y: r.top + window.scrollY,
                      w: r.width, h: r.height}; })
  .filter(b => b.w > 0 && b.h > 0)
"""

#: The legends shown: their right edge and their plot's width (canvas pixels).
LEGENDS = """
() => [...Bokeh.index.all_views()]
  .filter(v => v.model.type === "Legend" && v.model.visible && v.parent && v.parent.el
               && v.parent.el.checkVisibility({visibilityProperty: true}))
  .map(v => ({title: String(v.parent.model.title.text), right: v.bbox.right,
              width: v.parent.bbox.width}))
"""


#: Rows of the time series (the largest source with a "kl" column).
ROWS = """
() => Math.max(...[...Bokeh.documents[0]._all_models.values()]
  .filter(m => m.data instanceof Object && "kl" in m.data).map(s => s.data.t.length))
"""


def _overlaps(a, b, tol=1.0):
    return (a["x"] + a["w"] > b["x"] + tol and b["x"] + b["w"] > a["x"] + tol
            and a["y"] + a["h"] > b["y"] + tol and b["y"] + b["h"] > a["y"] + tol)


def _check_page(page, width, at_least):
    boxes = page.evaluate(PLOT_BOXES)
    assert len(boxes) >= at_least, boxes
    for i, a in enumerate(boxes):
        assert a["x"] >= 0 and a["x"] + a["w"] <= width + 1, (width, a)
        for b in boxes[i + 1:]:
            assert not _overlaps(a, b), (width, a, b)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # no legend is cut off at its plot's right edge (its 2 px padding and margin may be)
    for legend in page.evaluate(LEGENDS):
        assert legend["right"] <= legend["width"] + 4, (width, legend)
    return boxes


def _box(locator):
    box = locator.bounding_box()
    return {"x": box["x"], "y": box["y"], "w": box["width"], "h": box["height"]}


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_no_plot_overlaps_and_no_horizontal_scrolling(browser, server, size):
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(server, timeout=120000)  # (a loaded server builds the page for long)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_function(f"() => ({ROWS})() > 3", timeout=60000)  # frames drawn
        # heatmaps (3), tokens, KL, energy, rate
        boxes = _check_page(page, width, at_least=7)
        assert_plots_show_data(page, at_least=7)
        assert_no_sideways_scroll(page)
        # not one long column beside the sidebar: at 1024 px the plots shared no row
        # (seven rows); the plots that shrink now pair up
        tops = sorted(b["y"] for b in boxes)
        rows = [y for i, y in enumerate(tops) if i == 0 or y > tops[i - 1] + 20]
        assert len(rows) <= 4, (width, tops)
        # the controls: inside the window, and beside (not under) the plots
        open_group(page, "Export, slides and settings as text")
        for control in (page.locator("select").first,
                        page.get_by_role("button", name="Apply pasted settings"),
                        page.locator("select").nth(1)):
            box = _box(control)
            assert 0 <= box["x"] and box["x"] + box["w"] <= width, box
            assert box["x"] + box["w"] <= min(b["x"] for b in boxes) + 1
        # the sidebar can be hidden, giving the plots the whole width
        left = min(b["x"] for b in boxes)
        page.get_by_role("button", name="☰ Controls").click()
        page.wait_for_function(f"() => Math.min(...({PLOT_BOXES})().map(b => b.x)) < {left - 100}",
                               timeout=10000)
        _check_page(page, width, at_least=7)
        assert not page.get_by_role("button", name="Apply pasted settings").is_visible()
        page.get_by_role("button", name="☰ Controls").click()
        page.get_by_role("button", name="Apply pasted settings").wait_for(timeout=10000)
        # the inertial lab
        page.get_by_text("Inertial lab", exact=True).click()
        page.get_by_text(LAB_BUILT).first.wait_for(timeout=90000)  # built on first show
        page.wait_for_timeout(1000)
        _check_page(page, width, at_least=2)  # its first preset: the momentum base case
        assert_no_sideways_scroll(page)  # (its legends were 1,070 px wide at 1024 px)
        assert errors == []
    finally:
        page.goto("about:blank")
        context.close()
