"""Load test: N headless Chromium pages stream the dashboard at once (loopback only).

    .venv/bin/python scripts/load_test.py --pages 8 --seconds 120

Starts ``panel serve app/main.py`` with the README's flags on a free loopback port,
opens ``--pages`` pages in Debian's Chromium (/usr/bin/chromium), counts in each
page the changes of the attention heatmap's data source (frames) for ``--seconds``,
then closes the pages while they are still streaming.  Prints the frames/s of
every page, the worst page, the server's CPU% and RSS, and the server log's
error lines; exits 1 if a page stopped updating or the log has a Traceback/ERROR.
``measure`` is reused by ``tests/ui/test_sessions.py`` (reduced size).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil
from serving import CHROMIUM, CHROMIUM_ARGS, served

#: Installs a counter of the attention heatmap's data-source changes in the page.
COUNT = """
() => {
  const doc = Bokeh.documents[0];
  const src = [...doc._all_models.values()].find(
      m => m.data instanceof Object && "image" in m.data);
  window.__frames = 0;
  src.properties.data.change.connect(() => { window.__frames += 1; });
}
"""


def _open(page, url):
    page.goto(url, timeout=120000)  # (a loaded server builds the page for long)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60000)
    page.wait_for_selector(".bk-Canvas", timeout=60000)


def measure(browser, url, pages=8, seconds=120.0, server_pid=None) -> dict:
    """Frames/s of each of ``pages`` pages over ``seconds``; the pages are closed at the end
    while still streaming.  Returns ``{"fps": [...], "cpu": %, "rss": bytes}``."""
    contexts = [browser.new_context(viewport={"width": 1500, "height": 1100})
                for _ in range(pages)]
    tabs = [c.new_page() for c in contexts]
    try:
        for tab in tabs:
            _open(tab, url)
        for tab in tabs:
            tab.evaluate(COUNT)
        proc = psutil.Process(server_pid) if server_pid else None
        if proc is not None:
            proc.cpu_percent(None)
        start = time.monotonic()
        time.sleep(seconds)
        counts = [tab.evaluate("() => window.__frames") for tab in tabs]
        elapsed = time.monotonic() - start
        cpu = proc.cpu_percent(None) if proc is not None else float("nan")
        rss = proc.memory_info().rss if proc is not None else 0
    finally:
        for context in contexts:  # closed mid-stream, as a user closing the tab
            context.close()
    return {"fps": [n / elapsed for n in counts], "cpu": cpu, "rss": rss,
            "pages": pages, "seconds": elapsed}


def summary(result) -> str:
    fps = result["fps"]
    per_page = ", ".join(f"{f:.1f}" for f in fps)
    return (f"{result['pages']} pages × {result['seconds']:.0f} s: frames/s per page "
            f"[{per_page}]; worst page {min(fps):.1f} frames/s; server CPU "
            f"{result['cpu']:.0f}% (100% = one core), RSS {result['rss'] / 1e6:.0f} MB")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    log_path = Path(tempfile.mkdtemp()) / "panel.log"
    with served(log_path) as server:  # RuntimeError with the log if it does not start
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                result = measure(browser, server.url, args.pages, args.seconds,
                                 server.proc.pid)
            finally:
                browser.close()
        time.sleep(2)  # the closed pages' sessions are destroyed
    errors = server.errors()
    print(summary(result))
    print(f"server log: {log_path} ({len(errors)} Traceback/ERROR lines)")
    for line in errors[:20]:
        print("  " + line)
    return 0 if min(result["fps"]) > 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
