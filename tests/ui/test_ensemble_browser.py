"""Browser tier: the Noise ensemble tab renders its bands (issue #19; marker ``ui``)."""

import re

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Rows of the ensemble's source and its finite band values, read from BokehJS.
BANDS = """
() => {
  const src = [...Bokeh.documents[0]._all_models.values()].find(
      m => m.data && m.data.kl_mean !== undefined);
  const n = src.data.t.length;
  const lo = Array.from(src.data.kl_lo), hi = Array.from(src.data.kl_hi);
  return {n, spread: hi[n - 1] - lo[n - 1], prediction: src.data.prediction[n - 1]};
}
"""


def test_the_noise_ensemble_tab_draws_bands(page, server, console_errors):
    page.goto(f"{server}?model=attention&path=static&logit_noise=0.5&dt=0.05&n_tokens=6")
    page.wait_for_selector(".bk-Canvas", timeout=90000)
    page.get_by_text("Noise ensemble", exact=True).click()
    page.get_by_role("button", name="Run ensemble").click()
    page.get_by_text(re.compile(r"K = 8 replicas, σ = 0\.5")).first.wait_for(timeout=90000)
    page.wait_for_function(f"() => ({BANDS})().n > 1", timeout=30000)
    bands = page.evaluate(BANDS)
    assert bands["n"] == 61 and bands["spread"] > 0 and bands["prediction"] > 0
    assert console_errors == []
