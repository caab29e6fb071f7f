"""Browser tier: every source of a settings change resets the plots cleanly (issue #13).

A model change from the settings box (edited, then applied at once: Panel then runs
the click outside the document lock), a preset, a widget and the URL each restart the
run: the time series start again at t = 0 with the new model's legends, and the
server logs no error (the shared server: what it logged during the test).
"""

import re

import pytest
from helpers import open_group

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: The time series (t, d_energy) and the legend labels of the visible lines.
STATE = """
() => {
  const models = [...Bokeh.documents[0]._all_models.values()];
  const src = models.filter(m => m.data instanceof Object && "kl" in m.data)
                    .sort((a, b) => b.data.t.length - a.data.t.length)[0];
  const labels = models.filter(m => "renderers" in m && "label" in m && "index" in m
                                    && m.visible && m.renderers.some(r => r.visible))
                       .map(m => m.label.value);
  return {t: Array.from(src.data.t), energy: Array.from(src.data.d_energy), labels};
}
"""


def _open(page, url):
    page.goto(url)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30000)
    page.wait_for_selector(".bk-Canvas", timeout=30000)


def _wait_for_model(page, model, symbol):
    page.get_by_text(re.compile(rf"model {model}\b")).first.wait_for(timeout=15000)
    label = f"{symbol}(t) − {symbol}(0)"
    page.wait_for_function(f"() => {{ const s = ({STATE})(); "
                           f"return s.t.length > 3 && s.labels.includes({label!r}); }}",
                           timeout=15000)
    state = page.evaluate(STATE)
    t = state["t"]
    assert t[0] == 0 and all(b > a for a, b in zip(t, t[1:], strict=False)), t[:10]
    assert state["energy"][0] == 0
    assert state["labels"].count(label) == 1, state["labels"]
    return state


def test_model_changes_from_every_source_reset_the_plots(page, server, server_log,
                                                         console_errors):
    _open(page, server)
    open_group(page, "Export, slides and settings as text")
    box = page.locator("textarea")
    for model, symbol in (("transformer", "Φ"), ("canonical", "H"), ("transformer", "Φ")):
        text = box.input_value()
        box.fill(re.sub(r'"model": "[a-z_]+"', f'"model": "{model}"', text))
        # no blur, no wait: the click reaches the server while the text change is pending
        page.get_by_role("button", name="Apply pasted settings").click()
        _wait_for_model(page, model, symbol)
        assert f'"model": "{model}"' in box.input_value()
    # a preset
    page.locator("select").first.select_option(label="Reduced model conserves energy")  # loads it
    _wait_for_model(page, "reduced", "Hᵣ")
    # a widget
    page.locator("select").nth(1).select_option("cotangent_lift")
    _wait_for_model(page, "cotangent_lift", "H")
    assert server_log.errors() == [], server_log.text()
    assert "RuntimeError" not in server_log.text()
    assert console_errors == []


def test_a_url_model_starts_with_its_legends(page, server, server_log, console_errors):
    _open(page, server + "?model=transformer&n_tokens=6")
    _wait_for_model(page, "transformer", "Φ")
    assert server_log.errors() == []
    assert console_errors == []
