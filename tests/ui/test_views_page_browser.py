"""Browser tier of issue #27 (a lecture-ready page), the views: the heatmaps' colour
scale, pointing at a token, the Noise ensemble and Sweep tabs, the inertial lab's stale
notice, pinned runs and quench markers (marker ``ui``; the plain tests are in
``tests/test_views_page.py``)."""

import re

import pytest
from helpers import open_group
from serving import LAB_BUILT

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Page coordinates of the point (x, y) in data units, or of row ``y`` at the middle of
#: the frame when ``x`` is null, of the plot whose title starts with ``title``.
WHERE = """
([title, x, y]) => {
  for (const v of Bokeh.index.all_views()) {
    const t = v.model && v.model.title;
    if (!(t && t.text && t.text.startsWith(title) && v.frame)) continue;
    const r = v.canvas_view.el.getBoundingClientRect();
    const f = v.frame;
    const sx = x == null ? f.bbox.hcenter : f.x_scale.compute(x);
    return [r.left + sx, r.top + f.y_scale.compute(y)];
  }
  return null;
}
"""
#: The outlined row (its ``y0``) and the ringed token, as the page has them.
POINTED = """
() => {
  const doc = Bokeh.documents[0];
  return [Array.from(doc.get_model_by_name("token_rows").data.y0),
          Array.from(doc.get_model_by_name("token_chosen").indices || [])];
}
"""
#: The token plot's current positions.
TOKENS = """
() => {
  const src = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.token !== undefined && m.data.alpha === undefined
           && m.data.x && m.data.x.length > 0);
  return [Array.from(src.data.x), Array.from(src.data.y)];
}
"""
#: The colour limits of the attention map's mapper.
LIMITS = """
() => {
  const img = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.glyph && m.glyph.type === "Image" && m.data_source.data.frame !== undefined);
  return [img.glyph.color_mapper.low, img.glyph.color_mapper.high];
}
"""


def _pause(page):
    page.get_by_role("button", name=re.compile("Play")).click()
    page.get_by_text("❚❚ paused").first.wait_for(timeout=30000)


def test_heatmaps_use_the_data_range_and_point_at_a_token(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    _pause(page)
    # N = 8: the colour scale is the data's, not [0, 1] (a uniformly dark block)
    low, high = page.evaluate(LIMITS)
    assert (low, high) != (0, 1) and 0 <= low < high <= 1
    open_group(page, "View")
    page.locator("select").filter(has_text="fixed 0–1").select_option("fixed 0–1")
    page.wait_for_function(f"() => ({LIMITS})()[1] === 1", timeout=10000)
    # a click on row 3 of A outlines that row on every map and rings token 3
    page.mouse.click(*page.evaluate(WHERE, ["Attention A(t)", None, 3]))
    page.wait_for_function(f"() => ({POINTED})()[1].length === 1", timeout=10000)
    assert page.evaluate(POINTED) == [[2.5], [3]]
    # a click on token 5 of the token plot moves the outline to row 5
    xs, ys = page.evaluate(TOKENS)
    page.mouse.click(*page.evaluate(WHERE, ["Tokens", xs[5], ys[5]]))
    page.wait_for_function(f"() => ({POINTED})()[1][0] === 5", timeout=10000)
    assert page.evaluate(POINTED) == [[4.5], [5]]
    # the same row again (on A*) clears it
    page.mouse.click(*page.evaluate(WHERE, ["Softmax A*(t)", None, 5]))
    page.wait_for_function(f"() => ({POINTED})()[1].length === 0", timeout=10000)
    assert page.evaluate(POINTED) == [[], []]
    assert console_errors == []


#: Rows of the ensemble's source, read from BokehJS.
ENSEMBLE_ROWS = """
() => {
  const src = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.kl_mean !== undefined);
  return src.data.t.length;
}
"""


def test_the_noise_ensemble_opens_with_bands_refuses_by_name_and_shows_progress(
        page, server, console_errors):
    page.goto(f"{server}?n_tokens=4&dim=2&dt=0.05&logit_noise=0.5")
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    _pause(page)
    page.get_by_text("Noise ensemble", exact=True).click()
    # an example at once, no click needed, and how to run one's own
    page.get_by_text(re.compile(r"Example shown at first: K = 8")).first.wait_for(
        timeout=90000)
    page.get_by_text(re.compile(r"press Run ensemble")).first.wait_for(timeout=10000)
    assert page.evaluate(ENSEMBLE_ROWS) > 1
    t_end = page.get_by_label("t_end")
    # above the view's bounds: refused by name, not silently reverted
    t_end.fill("5000")
    t_end.press("Enter")
    page.get_by_text(re.compile(r"t_end = 5000(\.0)? not accepted")).first.wait_for(
        timeout=10000)
    # 30 (the old hidden maximum was 20) is taken; the run shows progress and the
    # example's bands stay until it is done
    t_end.fill("30")
    t_end.press("Enter")
    page.wait_for_timeout(500)
    page.get_by_role("button", name="Run ensemble").click()
    page.get_by_text(re.compile(r"computing the ensemble: K = 8 replicas to t = 30")).first \
        .wait_for(timeout=30000)
    assert page.evaluate(ENSEMBLE_ROWS) > 1
    assert page.locator("progress").count() == 1
    page.get_by_text(re.compile(r"K = 8 replicas, σ = 0\.5, model canonical, t = 0 … 30")) \
        .first.wait_for(timeout=180000)
    assert console_errors == []


def test_the_inertial_lab_says_its_plots_are_stale_until_run(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    _pause(page)
    page.get_by_text("Inertial lab", exact=True).click()
    page.get_by_text(LAB_BUILT).first.wait_for(timeout=90000)
    stale = page.get_by_text("The plots are stale")
    assert stale.count() == 0 or not stale.first.is_visible()
    kernel = page.get_by_label("A diagonal (kernel_diag)")
    kernel.fill("2,1")
    kernel.press("Enter")
    stale.first.wait_for(state="visible", timeout=10000)
    page.get_by_role("button", name="Run", exact=True).click()
    stale.first.wait_for(state="hidden", timeout=90000)
    assert console_errors == []


#: The finite values of the Sweep map's source (column ``lag_amplitude``).
MAP_VALUES = """
() => {
  const src = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.lag_amplitude !== undefined);
  if (!src) return 0;
  return Array.from(src.data.lag_amplitude).filter(v => Number.isFinite(v) && v > 0).length;
}
"""


def test_the_sweep_tab_opens_with_a_map(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    _pause(page)
    page.get_by_text("Sweep", exact=True).click()
    page.get_by_text(re.compile(r"Example shown at first")).first.wait_for(timeout=90000)
    page.get_by_text(re.compile(r"press Run")).first.wait_for(timeout=10000)
    page.wait_for_function(f"() => ({MAP_VALUES})() === 64", timeout=60000)
    assert console_errors == []


#: Set the main tab's slider titled ``title…`` to ``value`` as a drag of it would.
SET_SLIDER = """
([title, value]) => {
  const s = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.type && m.type.endsWith("Slider") && m.title && m.title.startsWith(title));
  s.value = value;
}
"""
#: This run's KL times and the pinned ghost's (the KL plot's first ghost source).
RUNS = """
() => {
  const models = [...Bokeh.documents[0]._all_models.values()];
  const run = models.filter(m => m.data instanceof Object && "dissipation_rate" in m.data)
                    .sort((a, b) => b.data.t.length - a.data.t.length)[0];
  const ghost = models.find(m => m.data instanceof Object && "d_energy" in m.data
                            && !("dissipation_rate" in m.data));
  return {run_t: Array.from(run.data.t), ghost_t: ghost ? Array.from(ghost.data.t) : []};
}
"""


def test_a_change_after_pinning_restarts_the_run_beside_the_ghost(page, server,
                                                                   console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    page.wait_for_function(f"() => ({RUNS})().run_t.length > 30", timeout=60000)
    _pause(page)
    open_group(page, "Compare runs")
    page.get_by_role("button", name="Pin run").click()
    page.get_by_text("pinned 1: canonical · β = 1").wait_for(timeout=60000)
    ghost_end = page.evaluate(RUNS)["ghost_t"][-1]
    assert ghost_end > 0.5
    page.evaluate(SET_SLIDER, ["β", 2.5])
    page.get_by_text(re.compile("The run restarted from t = 0")).wait_for(timeout=60000)
    # paused at t = 0 of the new run (no row of the old run left)
    page.wait_for_function(f"() => ({RUNS})().run_t.every(t => t === 0)", timeout=60000)
    assert page.evaluate(RUNS)["ghost_t"][-1] == ghost_end  # the ghost stays whole
    assert console_errors == []


#: The change markers' first times and labels.
MARKS = """
() => {
  const s = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.t0 !== undefined && m.data.text !== undefined && m.data.t0.length);
  return s ? [Array.from(s.data.t0), Array.from(s.data.text)] : [[], []];
}
"""


#: The change markers' lines (page x of each first time) on the plot titled ``title``,
#: their labels' widths and texts.
PLACED = """
(title) => {
  const s = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.t0 !== undefined && m.data.text !== undefined && m.data.t0.length);
  const v = [...Bokeh.index.all_views()].find(
      v => v.model && v.model.title && v.model.title.text === title && v.frame);
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = "10pt helvetica";
  return Array.from(s.data.t0).map((t, i) => [
      v.frame.x_scale.compute(t), ctx.measureText(s.data.text[i]).width, s.data.text[i]]);
}
"""


def test_dragging_beta_piles_up_no_marker_labels(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    page.wait_for_function(f"() => ({RUNS})().run_t.slice(-1)[0] > 1", timeout=60000)
    for k in range(1, 17):  # a slow drag: a value every quarter second
        page.evaluate(SET_SLIDER, ["β", 1 + 0.125 * k])
        page.wait_for_timeout(250)
    page.wait_for_timeout(1000)
    placed = page.evaluate(PLACED, "Attention lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)")
    assert placed and placed[0][2].startswith("β 1 → "), placed
    # each label, right-aligned at its line, ends left of the line before it
    for (x_before, _, _), (x, width, _) in zip(placed, placed[1:], strict=False):
        assert x - x_before >= width, placed
    assert console_errors == []


def test_the_beta_quench_preset_logs_one_quench_at_t_3(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    select = page.locator("select").filter(has_text="β quench")
    option = next(o for o in select.locator("option").all_inner_texts() if "β quench" in o)
    select.select_option(option)
    load = page.get_by_role("button", name="Load preset")
    if load.count():  # (choosing a preset may load it at once)
        load.click()
    page.get_by_text(re.compile(r"Quench at t = ")).first.wait_for(timeout=90000)
    page.wait_for_timeout(2000)  # frames after the quench: it was applied again then
    log = page.get_by_text(re.compile(r"Quench at t = ")).all_inner_texts()
    assert len(log) == 1 and re.search(r"Quench at t = 3: beta → 5$", log[0].strip()), log
    t0, labels = page.evaluate(MARKS)
    assert labels == ["β 1 → 5"] and abs(t0[0] - 3) < 1e-9
    assert console_errors == []
