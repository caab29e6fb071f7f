"""Browser tier: the Sweep tab runs a sweep on the server's embedded dask cluster, fills
its map and loads a clicked cell into the live view; an adaptive sweep draws its map and
points, its tooltip names a run, and the map downloads as CSV (marker ``ui``)."""

import re
from pathlib import Path

import pytest
from pixels import plots_data

pytestmark = pytest.mark.ui

#: The number of finite cells of the map (the metric the tab opens on: its shipped
#: example's, lag_amplitude) and the active tab.
STATE = """
() => {
  const models = [...Bokeh.documents[0]._all_models.values()];
  const meshes = models.filter(m => m.data instanceof Object && "lag_amplitude" in m.data);
  const tabs = models.find(m => m.tabs !== undefined && m.active !== undefined);
  const finite = meshes.map(m => [...m.data.lag_amplitude].filter(Number.isFinite).length);
  return [finite, tabs ? tabs.active : -1];
}
"""


@pytest.mark.slow
def test_sweep_tab_fills_its_map_and_loads_a_clicked_cell(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_text("Sweep", exact=True).first.click()
    cells = page.get_by_label("Cells")
    cells.wait_for(timeout=30000)
    cells.fill("3")
    cells.press("Enter")
    t_end = page.get_by_label("T end")
    t_end.fill("0.5")
    t_end.press("Enter")
    page.get_by_role("button", name="Run").last.click()
    page.get_by_text(re.compile(r"done: 9 points")).first.wait_for(timeout=180000)
    assert 9 in page.evaluate(STATE)[0]  # the run's 3 × 3 map (the example's 8 × 8 aside)
    canvas = page.locator(".bk-Canvas >> visible=true").last
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    page.wait_for_function(f"() => ({STATE})()[1] === 0", timeout=30000)
    # an adaptive sweep: its interpolated map and its points drawn, a tooltip naming a run
    page.get_by_text("Sweep", exact=True).first.click()
    page.get_by_text("adaptive", exact=True).click()
    points = page.get_by_label("Points")
    points.fill("8")
    points.press("Enter")
    page.get_by_role("button", name="Run").last.click()
    page.get_by_text(re.compile(r"done: 8 points")).first.wait_for(timeout=180000)
    shown = plots_data(page)
    title = next(t for t in shown if "nearest point" in t)
    assert shown[title] > 20000  # the picture fills the frame (the points on it)
    box = page.locator(".bk-Canvas >> visible=true").last.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    page.get_by_text(re.compile(r"\(run\)")).first.wait_for(timeout=10000)
    with page.expect_download(timeout=30000) as download:
        page.locator("text=Download CSV >> visible=true").first.click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines[0].startswith("point,beta,gamma,lag_amplitude") and len(lines) == 9
    assert console_errors == []
