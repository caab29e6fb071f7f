"""Screenshot of the dashboard while playing: ``python scripts/screenshot.py [URL] [N]``.

Serves nothing itself: point it at a running ``panel serve app/main.py``.
Writes ``assets/screenshot.png`` and prints the frames/s seen in the page.
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright
from serving import CHROMIUM, CHROMIUM_ARGS, COUNT_CHANGES, VIEWPORT

ROOT = Path(__file__).resolve().parents[1]
URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:5006/main"


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(URL)
    page.wait_for_selector(".bk-Canvas", timeout=30000)
    page.wait_for_timeout(4000)
    print("frames/s in the page:", page.evaluate(COUNT_CHANGES, 3000) / 3)
    print("status line:", page.get_by_text("frames/s").first.inner_text())
    page.screenshot(path=str(ROOT / "assets" / "screenshot.png"), full_page=True)
    browser.close()
