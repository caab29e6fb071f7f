"""Browser tier (issue #18): the "Clustering on the sphere" preset streams on the served
page: the cluster-count series grows frame after frame while the count falls, the
similarity map is N × N, and the caption links to the Theory section."""

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: ``[rows, first count, last count, last Eᵦ]`` of the clustering series (the source with
#: a "clusters" column), and the size of the similarity image, or null.
SERIES = """
() => {
  const models = [...Bokeh.documents[0]._all_models.values()];
  const src = models.find(m => m.data instanceof Object && "clusters" in m.data);
  const img = models.find(m => m.data instanceof Object && "image" in m.data
                          && !("frame" in m.data) && !("beta" in m.data)
                          && m.data.image[0].length === 32 * 32);
  if (!src) return null;
  const c = src.data.clusters, e = src.data.energy;
  return [c.length, c[0], c[c.length - 1], e[e.length - 1], img ? img.data.image[0].length : 0];
}
"""


def test_clustering_preset_streams(page, server, console_errors):
    page.goto(server)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30000)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    name = "Clustering on the sphere"
    page.locator("select").first.select_option(label=name)  # loads it
    # (a loaded machine: the preset's restart may take a while to reach the page)
    page.wait_for_function("() => window.location.search.includes('model=sphere')",
                           timeout=30000)
    page.locator("a[href='#tokens-on-the-sphere-clustering']").first.wait_for(timeout=30000)
    page.wait_for_function(f"() => {{ const s = ({SERIES})(); return s && s[0] > 5; }}",
                           timeout=30000)
    rows, first, _, _, _ = page.evaluate(SERIES)
    # streaming: more rows arrive, the count falls and the energy rises towards N²e/2
    page.wait_for_function(f"() => {{ const s = ({SERIES})(); "
                           f"return s[0] > {rows} + 20 && s[2] < {first}; }}", timeout=60000)
    rows2, first2, last, energy, image = page.evaluate(SERIES)
    assert first2 == first == 31 and last < first
    assert 643.0 < energy <= 1391.8
    assert image == 32 * 32
    page.screenshot(path="/tmp/clustering_browser.png", full_page=True)
    assert console_errors == []
