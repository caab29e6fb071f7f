"""Browser tier of issue #35, items 6, 9, 10 and 12: the lecture's main-tab steps as a
class sees them at 1280×720, read from pixels. One page, loaded once per URL:

* the real-head step in projector mode: A and A* alone, each frame large enough that
  every word's row and column has the labels' 18 px (they were ~110 px, words overlapping),
  both drawing data; the mouse over a cell names its words;
* the reduced model's step: no sideways scroll (a long legend made the page 1,304 px),
  no empty panel (lag map, KL, D ≡ 0 are left out, one line says so);
* the sphere step in projector mode: the unit circle's frame square;
* projector mode switched off on the default page: the controls come back at the left,
  not as a drawer fixed over the plots; a refused URL value leaves the URL; the β
  slider's handle gives screen readers β itself, not log10 β.
"""

import re
import time

import pytest
from pixels import assert_no_sideways_scroll, assert_plots_show_data, plot_frames

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Page script: the number of word labels and the viewport point at the middle of cell
#: (row, column) of the plot whose title starts with ``title``.
CELL = """
([title, row, col]) => {
  for (const v of Bokeh.index.all_views()) {
    const t = v.model && v.model.title;
    if (!(t && t.text && t.text.startsWith(title) && v.frame)) continue;
    const r = v.canvas_view.el.getBoundingClientRect();
    const f = v.frame;
    const m = v.model.left[0].major_label_overrides;
    return {n: m.size ?? Object.keys(m).length, x: r.left + f.x_scale.compute(col),
            y: r.top + f.y_scale.compute(row)};
  }
  return null;
}
"""


def _frames_when(page, ok, timeout=60.0):
    """The plots shown (:func:`pixels.plot_frames`), once ``ok(frames)`` holds."""
    end = time.monotonic() + timeout
    while True:
        frames = plot_frames(page)
        if ok(frames) or time.monotonic() > end:
            return frames
        page.wait_for_timeout(250)


def _open(page, url, banner):
    page.goto(url)
    page.get_by_text(banner).first.wait_for(timeout=90000)
    page.wait_for_selector(".bk-Canvas", state="attached", timeout=60000)


def test_main_tab_steps_as_a_class_sees_them(page, server, console_errors):
    page.set_viewport_size({"width": 1280, "height": 720})

    # -- the real head in projector mode: two large heatmaps, every word readable, and
    # the lag's log plot the step's text names beside them
    _open(page, server + "?tour_step=2&projector=true", "Tour 2/")
    frames = _frames_when(page, lambda fs: len(fs) == 3 and min(f["height"] for f in fs) > 200)
    kl = "Lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)"
    assert sorted(f["title"] for f in frames) == ["Attention A(t)", kl, "Softmax A*(t)"], frames
    cell = page.evaluate(CELL, ["Attention A(t)", 10, 2])  # the row of "it", column "animal"
    assert cell["n"] >= 12
    for f in frames:  # each word's row and column at least the labels' height (18 px)
        if f["title"] != kl:
            assert f["height"] >= 18 * cell["n"] and f["width"] >= 18 * cell["n"], f
    assert_plots_show_data(page, at_least=3, timeout=20)  # (its first frames on the way)
    page.mouse.move(cell["x"] - 30, cell["y"] - 30)
    page.mouse.move(cell["x"], cell["y"], steps=5)
    tip = page.locator(".bk-tooltip-content").first
    tip.wait_for(timeout=10000)
    text = tip.inner_text()
    assert re.search(r"\d+ \(it\)", text) and re.search(r"\d+ \(animal\)", text), text
    page.screenshot(path="/tmp/projector_real_head_1280.png")

    # -- the reduced model: no sideways scroll, no panel without data
    _open(page, server + "?tour_step=11", "Tour 11/")
    page.get_by_text("Not plotted, ≡ 0 for the reduced model").wait_for(timeout=60000)
    page.wait_for_timeout(1000)  # (the legends drawn)
    assert_no_sideways_scroll(page)
    titles = [f["title"] for f in plot_frames(page)]
    assert not any(t.startswith(("Lag log(A/A*)", "Attention lag", "Dissipation rate"))
                   for t in titles), titles
    assert_plots_show_data(page, only=["Attention A(t)", "Energy balance"], at_least=2)

    # -- the sphere in projector mode: a round unit circle
    _open(page, server + "?tour_step=12&projector=true", "Tour 12/")
    frames = _frames_when(page, lambda fs: len(fs) == 4)
    (sphere,) = [f for f in frames if f["title"] == "On the sphere"]
    assert abs(sphere["width"] - sphere["height"]) <= 2 and sphere["width"] >= 140, sphere

    # -- projector mode off on the default page; a refused URL value; β's real value
    _open(page, server + "?projector=true&n_tokens=2000&beta=2", "Projector mode")
    page.wait_for_function("() => !window.location.search.includes('n_tokens')",
                           timeout=60000)
    replay = page.get_by_role("button", name="↺ Replay from A(0)")
    page.get_by_role("button", name="☰ Controls").wait_for(timeout=60000)
    page.get_by_role("button", name="Projector mode").click()
    replay.wait_for(timeout=90000)
    # β = 2 on its log10 slider: the handle says 2 (it said 0.3)
    page.locator('.noUi-handle[aria-valuenow="2"][aria-valuetext="2"]').first.wait_for(
        state="attached", timeout=60000)
    box = replay.bounding_box()
    assert box["x"] < 320, box  # in the sidebar at the left, not a drawer at the right
    energy = [f for f in plot_frames(page) if f["title"].startswith("Energy balance")]
    assert energy and energy[0]["x"] > 300, energy  # beside the sidebar, not under it
    page.screenshot(path="/tmp/projector_off_1280.png")
    assert console_errors == []
