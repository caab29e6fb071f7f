"""Browser tier: the served dashboard in headless Chromium (marker ``ui``).

Five tests (the first load, play and pause, the CSV and the tabs, β, the theory link)
share one loaded default page (``module_page``: a page load is most of a test's cost),
in this order; each sets what it needs of the run (playing or paused, the main tab)
through the page's own controls, so that each still runs alone (``-k``). The others
open the URL they need on a page of their own. What the plots show is read from pixels
(``tests/ui/pixels.py``).
"""

import re

import pytest
from helpers import open_group
from pixels import assert_plots_show_data
from serving import COUNT_CHANGES, LAB_BUILT

pytestmark = pytest.mark.ui

#: A checksum of image number ``k`` (0: A, 1: A*, 2: log(A/A*)).
IMAGE_SUM = """
(k) => {
  const doc = Bokeh.documents[0];
  const srcs = [...doc._all_models.values()].filter(
      m => m.data instanceof Object && "image" in m.data);
  const img = srcs[k].data.image[0];
  let s = 0;
  for (let i = 0; i < img.length; i++) s += img[i] * (i % 7 + 1);
  return s;
}
"""
#: Number of rows in the time-series buffer (the largest source with a "kl" column:
#: hidden plots draw from an empty one).
ROWS = """
() => {
  const doc = Bokeh.documents[0];
  const sources = [...doc._all_models.values()].filter(
    m => m.data instanceof Object && "kl" in m.data);
  return Math.max(...sources.map(s => s.data.t.length));
}
"""
#: Whether the Play/Pause toggle is on (the run plays).
PLAYING = """
() => [...Bokeh.documents[0]._all_models.values()].find(
    m => typeof m.label === "string" && m.label.includes("Play") && "active" in m).active
"""
#: The plots of the main tab that draw the run (heatmaps, tokens, time series).
RUN_PLOTS = ["Attention A", "Softmax A*", "Lag log(A/A*)", "Attention lag", "Energy"]


def _open(page, url, query=""):
    page.goto(url + query)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30000)
    page.wait_for_selector(".bk-Canvas", timeout=30000)


def _rows_above(page, n, timeout=20000):
    page.wait_for_function(f"() => ({ROWS})() > {n}", timeout=timeout)


def _set_playing(page, playing: bool):
    """Play or pause with the page's toggle; on a pause, wait until no frame arrives for
    0.6 s (frames in flight land first)."""
    if page.evaluate(PLAYING) != playing:
        page.get_by_role("button", name=re.compile("Play")).click()
        page.wait_for_function(f"() => ({PLAYING})() === {str(playing).lower()}",
                               timeout=10000)
    for _ in range(20 if not playing else 0):
        if page.evaluate(COUNT_CHANGES, 600) == 0:
            return
    assert playing, "frames kept coming after the pause"


@pytest.fixture
def main_page(module_page, server):
    """The shared page on the default URL, on the main tab."""
    page = module_page.open(server)
    page.get_by_text("Nonequilibrium attention", exact=True).click()
    return page


@pytest.mark.slow
def test_page_loads_and_every_plot_renders(main_page, module_page):
    page = main_page
    # 3 heatmaps, KL (linear and log), energy, rate, distance, trajectories
    assert page.locator(".bk-Canvas").count() >= 7
    _rows_above(page, 3)
    assert page.get_by_text("Model: canonical").count() >= 1
    assert page.get_by_text("frames/s").count() >= 1
    # what a person sees: every plot shown draws data (the run's plots among them)
    counts = assert_plots_show_data(page, at_least=7)
    for prefix in RUN_PLOTS:
        assert any(title.startswith(prefix) for title in counts), (prefix, counts)
    assert module_page.errors == []


@pytest.mark.slow
def test_play_pause(main_page, module_page):
    page = main_page
    _set_playing(page, True)
    assert page.evaluate(COUNT_CHANGES, 1500) > 0  # plays
    page.get_by_role("button", name=re.compile("Play")).click()
    page.wait_for_timeout(600)  # let frames in flight arrive
    rows = page.evaluate(ROWS)
    assert page.evaluate(COUNT_CHANGES, 1200) == 0
    assert page.evaluate(ROWS) == rows
    page.get_by_role("button", name=re.compile("Play")).click()
    assert page.evaluate(COUNT_CHANGES, 1500) > 0
    assert module_page.errors == []


@pytest.mark.slow
def test_csv_download_and_inertial_tab(main_page, module_page):
    page = main_page
    _rows_above(page, 3)
    open_group(page, "Export, slides and settings as text")
    with page.expect_download(timeout=20000) as info:
        page.get_by_text("Download CSV").click()
    with open(info.value.path(), encoding="utf-8") as fh:
        text = fh.read()
    table = text.splitlines()  # a plain table: no commented header (issue #27, item 9)
    assert table[0].startswith("t,free_energy") and len(table) > 3
    assert table[0].endswith(",settings_json") and '""model"": ""canonical""' in table[1]
    assert re.fullmatch(r"canonical_t\d+\.\d{3}_\d{8}-\d{6}\.csv", info.value.suggested_filename)
    page.get_by_text("Inertial lab", exact=True).click()
    page.get_by_text(LAB_BUILT).first.wait_for(timeout=90000)  # built on first show
    page.get_by_text("Nonequilibrium attention", exact=True).click()
    page.get_by_text("Model: canonical").first.wait_for(state="visible", timeout=10000)
    assert module_page.errors == []


@pytest.mark.slow
def test_beta_slider_changes_state_and_plots(main_page, module_page):
    page = main_page
    _set_playing(page, False)
    before = page.evaluate(IMAGE_SUM, 1)
    handle = page.locator(".noUi-handle").nth(1)  # sliders: steps per frame, then β
    title = page.locator(".bk-slider-title").nth(1)
    assert "β" in title.inner_text()
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 60, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    page.wait_for_function("() => window.location.search.includes('beta=')", timeout=10000)
    beta = float(re.search(r"beta=([0-9.e+-]+)", page.evaluate("window.location.search"))[1])
    assert beta > 1.0
    page.wait_for_function(f"() => Math.abs(({IMAGE_SUM})(1) - {before}) > 1e-6", timeout=10000)
    assert module_page.errors == []


@pytest.mark.slow
def test_preset_loads(page, server, console_errors):
    _open(page, server)
    name = "Persistent lag under rotation"
    page.locator("select").first.select_option(label=name)  # loads it
    page.get_by_text(name).nth(1).wait_for(timeout=10000)
    page.wait_for_function("() => window.location.search.includes('model=attention')",
                           timeout=10000)
    assert "path" not in page.evaluate("window.location.search")  # rotation is the default
    _rows_above(page, 3)
    assert_plots_show_data(page, only=RUN_PLOTS, at_least=5)
    assert console_errors == []


@pytest.mark.slow
def test_frames_per_second_at_n64(page, server, console_errors, capsys):
    _open(page, server, "?n_tokens=64")
    _rows_above(page, 1)  # streaming
    changes = page.evaluate(COUNT_CHANGES, 2500)
    fps = changes / 2.5
    status = page.get_by_text("frames/s").first.inner_text()
    with capsys.disabled():
        print(f"\n[ui] N = 64: {fps:.1f} heatmap updates/s in the browser; server: {status}")
    assert changes > 0
    assert "N = 64" in status
    assert_plots_show_data(page, only=["Attention A", "Softmax A*"], at_least=2)
    assert console_errors == []


#: Whether the element with id ``(id)`` (inside any shadow root) is in the viewport, and
#: how KaTeX drew the page: its HTML output shown, its fonts loaded.
THEORY_STATE = """
(id) => {
  function find(root) {
    const hit = root.getElementById ? root.getElementById(id) : null;
    if (hit) return hit;
    for (const node of root.querySelectorAll("*")) {
      if (node.shadowRoot) { const inner = find(node.shadowRoot); if (inner) return inner; }
    }
    return null;
  }
  const el = find(document);
  const box = el ? el.getBoundingClientRect() : null;
  const html = el ? el.getRootNode().querySelector(".katex-html") : null;
  return {found: !!el, top: box ? box.top : null, height: window.innerHeight,
          katexHtml: html ? getComputedStyle(html).display : null,
          fonts: [...document.fonts].filter(f => f.status === "loaded")
                                    .map(f => f.family).join(",")};
}
"""


@pytest.mark.slow
def test_equations_link_opens_the_theory_page_at_the_model(main_page, module_page):
    page = main_page
    _set_playing(page, False)
    link = page.get_by_text("Theory page: Canonical model ▸")
    link.scroll_into_view_if_needed()
    link.click()
    page.wait_for_function(f"() => {{ const s = ({THEORY_STATE})('canonical'); "
                           "return s.found && s.top >= -2 && s.top < s.height / 2; }",
                           timeout=30000)  # (the Theory tab is built on its first show)
    state = page.evaluate(THEORY_STATE, "canonical")
    assert state["katexHtml"] == "inline"  # KaTeX's HTML output, not Panel's MathML
    assert "App-KaTeX_Main" in state["fonts"] and "App-KaTeX_Size" in state["fonts"]
    assert page.get_by_text("Part I — Nonequilibrium attention").first.is_visible()
    # a link of the contents goes to another section, on the same tab
    page.get_by_role("link", name="Value matching").click()
    page.wait_for_function(f"() => {{ const s = ({THEORY_STATE})('value_matching'); "
                           "return s.top >= -2 && s.top < s.height / 2; }", timeout=15000)
    assert module_page.errors == []


#: Over ``ms``: the attention plot's repaints, the frames it received, and every
#: acknowledgement the page sent (the ``frame_ack`` model's tags) with the frame the
#: attention source held and the repaints done at that moment.
ACKS = """
async (ms) => {
  const doc = Bokeh.documents[0];
  const models = [...doc._all_models.values()];
  const source = models.find(m => m.data instanceof Object && "image" in m.data
                             && "frame" in m.data);
  const ack = models.find(m => m.name === "frame_ack");
  const plot = models.find(m => m.renderers && m.renderers.some(r => r.data_source === source));
  const view = Bokeh.index.find_one(plot);
  const out = {paints: 0, frames: 0, acks: []};
  const painted = () => { out.paints += 1; };
  const received = () => { out.frames += 1; };
  const acked = () => { out.acks.push([ack.tags[0], source.data.frame[0], out.paints]); };
  view.repainted.connect(painted);
  source.properties.data.change.connect(received);
  ack.properties.tags.change.connect(acked);
  await new Promise(r => setTimeout(r, ms));
  view.repainted.disconnect(painted);
  source.properties.data.change.disconnect(received);
  ack.properties.tags.change.disconnect(acked);
  return out;
}
"""


def test_frames_are_acknowledged_once_painted(page, server, console_errors):
    """The page acknowledges a frame after its plot painted it (flow control counts
    frames not yet shown), on a model of its own: no more acks than repaints, each the
    frame the map shows, and frames keep coming (the server sees the acks). At 12
    frames/s (its own cap, in its URL: the shared server's 4 leave no margin over the
    frames counted)."""
    _open(page, server, "?n_tokens=16&max_fps=12")
    _rows_above(page, 3)  # streaming
    out = page.evaluate(ACKS, 3000)
    assert out["frames"] >= 10, out
    assert 5 <= len(out["acks"]) <= out["paints"], out
    # an ack only follows a repaint (the acks' repaint counts are each at least one
    # more than the previous ack's) and names the frame shown
    counts = [n for _, _, n in out["acks"]]
    assert all(b > a for a, b in zip(counts, counts[1:], strict=False)), out
    assert all(acked == shown for acked, shown, _ in out["acks"]), out
    assert console_errors == []
