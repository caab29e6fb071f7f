"""Browser tier: the page's styles come from the server, never from Panel's CDN.

A lecture hall may have no internet. Panel links its components' stylesheets to its CDN
until a session's page is rendered, where it turns them to the server's copy; a session
created while another was being destroyed (a tab closed as another opened: the test
server drops closed sessions after a second) kept the CDN links, and offline its widgets
lost their styles (seen on about half of the page loads in a row; app/main.py now gives
every session the server's copy from the start).
"""

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Stylesheet links (in the components' shadow roots) that point at a CDN.
CDN_LINKS = """
() => { const out = [];
  const walk = (root) => { for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) {
      for (const l of el.shadowRoot.querySelectorAll('link'))
        if (!l.href.startsWith(location.origin)) out.push(l.href);
      walk(el.shadowRoot); } } };
  walk(document); return out; }
"""


def test_pages_opened_one_after_another_link_the_server_s_styles(page, server):
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    for _ in range(4):
        page.goto(server)
        page.wait_for_selector(".bk-Canvas", timeout=60000)
        page.wait_for_timeout(1500)  # the previous session is destroyed meanwhile
        assert page.evaluate(CDN_LINKS) == []
        assert [url for url in failed if not url.startswith("http://127.0.0.1")] == []
        page.goto("about:blank")
        page.wait_for_timeout(1200)
