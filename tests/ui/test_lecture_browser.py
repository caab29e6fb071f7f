"""Browser tier (issue #35): the lecture as a class sees it.

One page at 1280×720 walks every step of the shipped tour with Next — once as it opens,
once in projector mode — and at each step waits until the step's run has reached its
end (the banner's clock shows "■"; a lab step: its plots drawn), then checks by pixels
what a class would see: every visible plot shows data (not only axes and legends), the
page does not scroll sideways, in projector mode the page fits the screen, no run says
"diverged" or "failed", and the run on the plots spans the step from t = 0 to its end
(the evidence the text speaks of has not scrolled away; the quench step: its jump in the
energy plot's range; the lag's log line does not start at the 1e-12 floor), and the plot
the step's text names first (its ``plots``) is in view when the step opens: scrolled
there in the page, kept by projector mode.

Cheap by design: one server, one page, the steps reached by Next; the page's own speed
setting (``steps_per_frame`` in the URL) brings each run to its end in a few dozen
frames — the same end, the same plots. Every step's failures are collected and the test
fails once, listing them all.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from pixels import (
    MIN_PIXELS,
    assert_fits_viewport,
    assert_no_sideways_scroll,
    plot_frames,
    plots_data,
)

from app.teaching.tour import load_tour

pytestmark = [pytest.mark.ui, pytest.mark.slow]

TOUR = load_tour()
STEPS = TOUR["steps"]
#: Integrator steps per frame while walking (the page's speed setting): a step's run
#: reaches its end in a few frames (the shared server sends 4 frames/s, conftest.MAX_FPS).
SPEED = 160
#: Longest wait for one step's run to reach its end (s).
STEP_TIMEOUT = 45
#: Longest wait for a lab step's plots to draw (s; the lab runs its experiments at once),
#: read every LAB_POLL ms (one screenshot per scroll position: well under a second).
LAB_TIMEOUT, LAB_POLL = 20, 1000

#: Page script: the time series' times (first, last) and the energy plot's y range with
#: its data's extent (the quench's jump must lie in it).
SERIES = """
() => {
  const doc = Bokeh.documents[0];
  let src = null;
  for (const m of doc._all_models.values()) {
    if (m.data instanceof Object && "d_energy" in m.data && "kl_log" in m.data) src = m;
  }
  if (src == null) return null;
  const t = Array.from(src.data.t), e = Array.from(src.data.d_energy);
  let range = null;
  for (const v of Bokeh.index.query(v => v.frame_view != null)) {
    const title = (v.model.title && v.model.title.text) || "";
    if (title.startsWith("Energy")) range = [v.model.y_range.start, v.model.y_range.end];
  }
  // the lag's line on its log axis: the first row it draws (a lag of 0 is stored at the
  // 1e-12 floor, and a line through it fell from the curve to the axis's foot)
  let first = null;
  for (const v of Bokeh.index.query(v => v.all_indices != null && v.model.glyph != null)) {
    const y = v.model.glyph.y;
    if (y == null || y.field !== "kl_log" || !v.model.visible) continue;
    const kl = v.model.data_source.data.kl_log, idx = [...v.all_indices];
    if (idx.length) first = kl[idx[0]];
  }
  return {t0: t.length ? t[0] : null, t1: t.length ? t[t.length - 1] : null,
          energy: e, times: t, range: range, first_kl_log: first};
}
"""


#: Page script: the id of the plot the tour's step names first (the tour's scroller's
#: target), or null.
FOCUS = """
() => {
  for (const m of Bokeh.documents[0]._all_models.values()) {
    const d = m.data;
    if (d != null && typeof d === "object" && "target" in d && "count" in d) return d.target;
  }
  return null;
}
"""
#: Page script: the tour banner's top and bottom in the window (px), or null.
BANNER = """
() => {
  for (const v of Bokeh.index.query(v => (v.model.css_classes || []).includes("tour"))) {
    if (v.el && v.el.isConnected) {
      const r = v.el.getBoundingClientRect();
      return [r.top, r.bottom];
    }
  }
  return null;
}
"""
#: Longest wait for the step's first plot to come into view (s).
FOCUS_TIMEOUT = 15


def _focus_frame(page) -> dict | None:
    """The frame of the plot the step names first, if it lies wholly in the viewport with
    the tour's banner (the step's text and clock) wholly in view above it."""
    target = page.evaluate(FOCUS)
    banner = page.evaluate(BANNER)
    if banner is None or banner[0] < -1:
        return None
    view = page.viewport_size
    for frame in plot_frames(page):
        if frame["id"] == target and frame["width"] > 0 and frame["height"] > 0:
            inside = (frame["x"] >= 0 and frame["y"] >= banner[1] - 1
                      and frame["x"] + frame["width"] <= view["width"]
                      and frame["y"] + frame["height"] <= view["height"])
            return frame if inside else None
    return None


def _visible_text(page, pattern) -> list[str]:
    found = []
    for loc in page.get_by_text(pattern).all():
        try:
            if loc.is_visible():
                found.append(loc.inner_text()[:160])
        except Exception:  # (a node replaced while read)
            continue
    return found


def _wait(page, condition, timeout=STEP_TIMEOUT, poll=250) -> bool:
    """Poll ``condition()`` every ``poll`` ms until true or ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        page.wait_for_timeout(poll)
    return condition()


def _check_step(page, number: int, projector: bool) -> list[str]:
    """What a class would find wrong at step ``number`` (empty: nothing)."""
    step = STEPS[number - 1]
    lab = step.get("tab", "main") == "lab"
    problems = []
    # before anything here scrolls (the pixels' reading does): the plot the text names
    # first is brought into view as the step opens (its data: read below with the rest)
    if not _wait(page, lambda: _focus_frame(page) is not None, timeout=FOCUS_TIMEOUT):
        problems.append(f"the plot the step names first ({step['plots'][0]}) is not in view "
                        f"below the banner (banner {page.evaluate(BANNER)})")
    if lab:
        drawn = _wait(page, lambda: all(v >= MIN_PIXELS for v in plots_data(page).values()),
                      timeout=LAB_TIMEOUT, poll=LAB_POLL)
        if not drawn:
            problems.append("the lab's plots did not draw")
    else:
        end = step["t_end"]
        if not _wait(page, lambda: bool(_visible_text(page, re.compile(r"^■ t = ")))):
            problems.append(f"the run did not reach its end t = {end:g} "
                            f"(clock: {_visible_text(page, re.compile(r't = '))[:2]})")
    blank = {k: v for k, v in plots_data(page).items() if v < MIN_PIXELS}
    if "kl_slope" in step.get("annotations", []):
        # a relaxation step ends with the lag closed (KL ~1e-9): its lag map log(A/A*) is
        # then rightly pale, the evidence the step is about; the KL plot shows the rest
        blank.pop("Lag log(A/A*)", None)
    if blank:
        problems.append(f"plots without data: {json.dumps(blank, ensure_ascii=False)}")
    stopped = _visible_text(page, re.compile(r"\b(diverged|failed)\b"))
    if stopped:
        problems.append(f"a run stopped: {stopped}")
    for check in (assert_no_sideways_scroll, *([assert_fits_viewport] if projector else [])):
        try:
            check(page)
        except AssertionError as err:
            problems.append(f"{check.__name__}: {str(err)[:200]}")
    if not lab:
        series = page.evaluate(SERIES)
        if series is None or series["t0"] is None:
            problems.append("no time series on the page")
        else:
            # (the times drawn, in the page's order, with the problem: an order the server
            # never sent, e.g. a batch of rows landing after a later one, shows there)
            drawn = series["times"]
            times = ", ".join(f"{t:.4g}" for t in (drawn if len(drawn) <= 40
                                                   else drawn[:20] + drawn[-20:]))
            if series["t0"] > 1e-9:  # the start scrolled out of the window
                problems.append(f"the plots start at t = {series['t0']:.3g}, not 0 "
                                f"(times: {times})")
            if abs(series["t1"] - step["t_end"]) > 1e-6:
                problems.append(f"the plots end at t = {series['t1']:.4g}, "
                                f"not at the step's end {step['t_end']:g} (times: {times})")
            if series["first_kl_log"] is not None and series["first_kl_log"] <= 1e-12:
                problems.append("the log-KL line starts at the 1e-12 floor (a drop to the "
                                "axis's foot at the start)")
            if "quench" in step.get("annotations", []) and series["range"]:
                lo, hi = series["range"]
                e = series["energy"]
                if not e or min(e) < lo or max(e) > hi or max(e) - min(e) < 1.0:
                    problems.append(f"the quench's jump is not in the energy plot's range "
                                    f"[{lo:.3g}, {hi:.3g}] (data {min(e):.3g}…{max(e):.3g})")
    return problems


@pytest.mark.parametrize("projector", [False, True], ids=["1280x720", "projector"])
def test_every_tour_step_shows_its_evidence_as_a_class_sees_it(browser, server, projector):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors, at, times = [], [0], []  # the page's errors, with the step they came at
    page.on("pageerror", lambda exc: errors.append(f"step {at[0]}: {exc}"))
    failures = []
    try:
        query = f"?tour_step=1&steps_per_frame={SPEED}" + ("&projector=true" if projector else "")
        page.goto(server + query)
        for number in range(1, len(STEPS) + 1):
            banner = f"Tour {number}/{len(STEPS)}"
            at[0] = number
            began = time.monotonic()
            if number > 1:
                page.get_by_role("button", name="Next ▶").click()
            try:
                page.get_by_text(banner).wait_for(timeout=60000)
            except Exception:
                failures.append(f"step {number}: its banner never showed")
                break
            problems = _check_step(page, number, projector)
            times.append(f"{number}: {time.monotonic() - began:.0f} s")
            if problems:
                page.screenshot(path=f"/tmp/lecture_{'projector' if projector else '1280'}"
                                     f"_{number:02d}.png")
            failures += [f"step {number} ({STEPS[number - 1]['title']}): {p}" for p in problems]
        failures += [f"page error: {e}" for e in dict.fromkeys(errors)]
    finally:
        context.close()
    assert not failures, "\n".join(failures) + "\nseconds per step: " + ", ".join(times)
