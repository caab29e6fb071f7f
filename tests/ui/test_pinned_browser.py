"""Browser tier (issue #16, item 4): pin a run, change β, and see both runs' curves —
the pinned one grey on the KL plot, its legend naming β = 1 against this run's β = 4."""

import pytest
from helpers import open_group
from pixels import assert_plots_show_data

pytestmark = [pytest.mark.ui, pytest.mark.slow]

KL_LOG = "Attention lag Σᵢ KL(Aᵢ‖A*ᵢ) (log axis)"
#: The KL plot's curves: this run's (the streamed source) and the shown ghosts'.
STATE = """
(title) => {
  const models = [...Bokeh.documents[0]._all_models.values()];
  const fig = models.find(m => m.title && m.title.text === title);
  const run = models.filter(m => m.data instanceof Object && "dissipation_rate" in m.data)
                    .sort((a, b) => b.data.t.length - a.data.t.length)[0];
  const ghosts = fig.renderers.filter(r => r.visible && r.data_source.data
                                      && !("dissipation_rate" in r.data_source.data)
                                      && "d_energy" in r.data_source.data
                                      && r.glyph.y && r.glyph.y.field === "kl_log");
  const legend = fig.below.find(m => "items" in m);
  return {
    run_t: Array.from(run.data.t), run_kl: Array.from(run.data.kl_log),
    ghosts: ghosts.map(r => ({t: Array.from(r.data_source.data.t),
                              kl: Array.from(r.data_source.data.kl_log),
                              alpha: r.glyph.line_alpha.value})),
    labels: legend.items.filter(i => i.visible).map(i => i.label.value),
    title: legend.title,
  };
}
"""


def test_pin_change_beta_and_see_both_curves(page, server, console_errors):
    page.goto(server)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.wait_for_function(f"() => ({STATE})({KL_LOG!r}).run_t.length > 30", timeout=60000)
    open_group(page, "Compare runs")
    open_group(page, "Export, slides and settings as text")
    page.get_by_role("button", name="Pin run").click()
    page.get_by_text("pinned 1: canonical · β = 1").wait_for(timeout=15000)
    pinned = page.evaluate(STATE, KL_LOG)["ghosts"]
    assert len(pinned) == 1 and len(pinned[0]["t"]) > 30
    box = page.locator("textarea")
    box.fill('{"beta": 4}')
    page.get_by_role("button", name="Apply pasted settings").click()
    # the new run has begun: its first KL is not the pinned run's (KL(0) depends on β)
    page.wait_for_function(
        f"() => {{ const s = ({STATE})({KL_LOG!r}); return s.title === 'this run: β = 4' "
        "&& s.run_t.length > 10 && s.run_t[0] === 0 && s.ghosts.length > 0 "
        "&& s.run_kl[0] !== s.ghosts[0].kl[0]; }", timeout=30000)
    state = page.evaluate(STATE, KL_LOG)
    assert len(state["ghosts"]) == 1, [(len(g["t"]), g["alpha"]) for g in state["ghosts"]]
    (ghost,) = state["ghosts"]
    assert ghost["t"] == pinned[0]["t"] and ghost["kl"] == pinned[0]["kl"]  # kept as pinned
    assert ghost["alpha"] < 1  # faded
    assert "pinned: β = 1" in state["labels"]
    # both curves drawn, and they differ: β = 4 is not the run pinned at β = 1
    n = min(len(state["run_kl"]), len(ghost["kl"]))
    assert n > 10 and state["run_kl"][1:n] != ghost["kl"][1:n]
    assert_plots_show_data(page, only=[KL_LOG])  # drawn on the screen
    page.screenshot(path="/tmp/pinned_browser.png")
    assert console_errors == []
