"""Browser tier (issue #20, item 1): the quench preset on the served page — the change
is marked on the energy and KL plots by a vertical line labelled "β 1 → 5", the
confinement notice is shown once ‖X‖ has doubled (t ≈ 12, issue #27), and the caption
links to the protocol work."""

import re

import pytest
from pixels import assert_plots_show_data

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: The mid-run change markers of the plot titled ``title``: [[location, label text]]
#: (rows of the markers' source, drawn by a line renderer and a label set on the plot).
MARKERS = """
(title) => {
  const fig = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.title && m.title.text === title);
  if (!fig) return null;
  const r = fig.renderers.find(r => r.data_source && r.data_source.data
                                    && r.data_source.data.text !== undefined);
  if (!r) return null;
  const d = r.data_source.data;
  return [...d.t0].map((t, i) => [t, d.text[i]]);
}
"""
ENERGY = "Energy balance (residual 0 ⇔ dissipation law)"


def test_quench_marked_on_the_plots(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    name = "β quench at t = 3"
    page.locator("select").first.select_option(label=name)  # loads it
    link = page.locator("a[href='#changing-a-setting-during-a-run-protocol-work']").first
    link.wait_for(timeout=10000)
    page.wait_for_function(f"() => {{ const m = ({MARKERS})({ENERGY!r}); "
                           "return m && m.length > 0; }", timeout=30000)
    for title in (ENERGY, "Attention lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)"):
        ((location, text),) = page.evaluate(MARKERS, title)
        assert text == "β 1 → 5" and location == pytest.approx(3.0, abs=0.05)
    # the curves around the marker are on the screen
    assert_plots_show_data(page, only=[ENERGY, "Attention lag"], at_least=2)
    # the preset's run ends at its t_end = 8, the jump in view, before ‖X‖ doubles (t ≈ 12:
    # the confinement notice then, tested in test_dashboard_bookkeeping.py) and diverges
    page.get_by_text(re.compile(r"ended: ↺ Replay")).first.wait_for(timeout=120000)
    assert page.get_by_text("the confinement that keeps H bounded below").count() == 0 \
        or not page.get_by_text("the confinement that keeps H bounded below").first.is_visible()
    page.screenshot(path="/tmp/quench_browser.png")
    assert console_errors == []
