"""Browser tier: the main tab's equations are drawn by KaTeX (issue #13, item 4).

Panel renders each pane in a shadow root; without KaTeX's stylesheet in the pane and
its fonts at document level the page shows KaTeX's MathML, drawn without accents (no
dot over Ẋ, no bar over C̄) and with small brackets. Here: KaTeX's HTML output is
shown, its fonts are loaded, every accent sits above its symbol, fraction bars are drawn,
and a screenshot of the panel is taken (``tmp_path``).
"""

import re

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Where each accent of an element's KaTeX output is drawn, relative to its symbol.
ACCENTS = """
(root) => [...root.querySelectorAll(".accent")].map(el => {
  const body = el.querySelector(".accent-body");
  const base = [...el.querySelectorAll(".mord")].find(m => !body.contains(m));
  const range = document.createRange();  // the glyph's box (the body itself is 0 wide)
  range.selectNodeContents(body);
  const b = range.getBoundingClientRect(), a = base.getBoundingClientRect();
  return {accent: body.textContent, base: base.textContent,
          accentTop: b.top, accentBottom: b.bottom, accentLeft: b.left, accentRight: b.right,
          baseTop: a.top, baseBottom: a.bottom, baseLeft: a.left, baseRight: a.right};
})
"""
#: How KaTeX drew an element: HTML output display, MathML size, fraction bars, fonts.
STATE = """
(root) => {
  const html = root.querySelector(".katex-html");
  const mathml = root.querySelector(".katex-mathml");
  const m = mathml ? mathml.getBoundingClientRect() : null;
  const bars = [...root.querySelectorAll(".frac-line")].map(
      l => l.getBoundingClientRect().height);
  return {html: html ? getComputedStyle(html).display : null,
          mathml: m ? m.width * m.height : null, bars,
          fonts: [...document.fonts].filter(f => f.status === "loaded").map(f => f.family)};
}
"""


@pytest.mark.parametrize("model", ["attention", "canonical"])
def test_main_tab_equations_are_drawn_by_katex(page, server, console_errors, tmp_path, model):
    page.goto(f"{server}?model={model}")
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.get_by_role("button", name=re.compile("Play")).click()  # pause
    pane = page.locator(".explain").first
    pane.scroll_into_view_if_needed()
    pane.locator(".katex-html").first.wait_for(timeout=15000)
    page.wait_for_function("() => document.fonts.status === 'loaded'", timeout=15000)
    root = pane.evaluate_handle("el => el.shadowRoot || el")
    state = page.evaluate(STATE, root)
    assert state["html"] == "inline"  # KaTeX's HTML output, not Panel's MathML
    assert state["mathml"] is not None and state["mathml"] <= 1.0  # kept for readers only
    assert {"App-KaTeX_Main", "App-KaTeX_Math"} <= set(state["fonts"]), state["fonts"]
    assert state["bars"] and min(state["bars"]) > 0  # fraction bars drawn
    accents = page.evaluate(ACCENTS, root)
    assert accents, "no accent (Ẋ, Ż, Ṡ) drawn"
    for a in accents:  # the dot (or bar) is drawn above its symbol, not beside it
        assert a["accentRight"] > a["accentLeft"] and a["accentTop"] < a["baseTop"] - 2, a
        assert a["baseLeft"] - 1 <= a["accentLeft"] and a["accentRight"] <= a["baseRight"] + 1, a
    shot = tmp_path / f"equations_{model}.png"
    pane.screenshot(path=str(shot))
    assert shot.stat().st_size > 5000
    assert console_errors == []
