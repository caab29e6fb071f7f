"""Where the page's time goes while streaming: ``python scripts/profile_page.py``.

Serves the dashboard (``serving.served``), opens ``?n_tokens=N&dim=d`` in headless
Chromium and, after a warm-up, reports for ``--seconds``:

* per plot: calls per second and milliseconds of BokehJS's paint and layout check
  (``_actual_paint`` and ``_invalidate_layout_if_needed`` of each plot view, wrapped
  in the page);
* with ``--cpu-profile``: the page's JavaScript CPU profile (Chrome DevTools
  protocol), functions by self time and by total time.

Figures are absolute and depend on the machine's load: compare runs side by side.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

from bench_browser import _viewport
from serving import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, served

#: Wraps paint and layout check of every plot view; returns the totals after ``ms``.
PER_PLOT = """
async (ms) => {
  const stats = {};
  const views = [...Bokeh.index.all_views()].filter(v => v._actual_paint);
  const wrap = (v, method, key) => {
    const orig = v[method].bind(v);
    v[method] = (...args) => {
      const t0 = performance.now();
      const result = orig(...args);
      const s = stats[key] ??= {calls: 0, ms: 0};
      s.calls += 1;
      s.ms += performance.now() - t0;
      return result;
    };
  };
  for (const v of views) {
    const title = v.model.title ? String(v.model.title.text).slice(0, 40) : v.model.type;
    wrap(v, "_actual_paint", `${title} | paint`);
    wrap(v, "_invalidate_layout_if_needed", `${title} | layout check`);
  }
  await new Promise(r => setTimeout(r, ms));
  return stats;
}
"""


def _frame_key(node) -> str:
    cf = node["callFrame"]
    url = cf["url"].split("/")[-1].split("?")[0]
    return f'{cf["functionName"] or "(anonymous)"} {url}:{cf["lineNumber"]}'


def summarize_profile(profile: dict, top: int = 25) -> list[str]:
    """Lines of the top functions of a DevTools CPU profile by self and total time."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children", [])}
    self_ms, total_ms = collections.Counter(), collections.Counter()
    deltas = profile["timeDeltas"][1:] + [0]
    for sample, dt in zip(profile["samples"], deltas, strict=True):
        self_ms[_frame_key(nodes[sample])] += dt / 1e3
        seen, node = set(), sample
        while node is not None:
            key = _frame_key(nodes[node])
            if key not in seen:
                total_ms[key] += dt / 1e3
                seen.add(key)
            node = parent.get(node)
    lines = [f"CPU profile: {sum(deltas) / 1e3:.0f} ms sampled", "  by self time:"]
    lines += [f"  {ms:9.1f} ms  {key}" for key, ms in self_ms.most_common(top)]
    lines.append("  by total time:")
    lines += [f"  {ms:9.1f} ms  {key}" for key, ms in total_ms.most_common(top)]
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--n-tokens", type=int, default=64)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--viewport", type=_viewport, default=VIEWPORT, metavar="WxH",
                        help="page size, e.g. 1280x720")
    parser.add_argument("--cpu-profile", action="store_true",
                        help="also record the page's JavaScript CPU profile")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp) / "panel.log") as server:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=args.viewport)
            page.goto(f"{server.url}?n_tokens={args.n_tokens}&dim={args.dim}")
            page.wait_for_selector(".bk-Canvas", timeout=60000)
            page.wait_for_timeout(3000)
            ms = int(1000 * args.seconds)
            stats = page.evaluate(PER_PLOT, ms)
            profile = None
            if args.cpu_profile:
                cdp = page.context.new_cdp_session(page)
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 200})
                cdp.send("Profiler.start")
                page.wait_for_timeout(ms)
                profile = cdp.send("Profiler.stop")["profile"]
            browser.close()
    print(f"N = {args.n_tokens}, d = {args.dim}: per plot, over {args.seconds:g} s")
    print(f"  {'ms/s':>7} {'calls/s':>8} {'ms/call':>8}  plot | what")
    for key, s in sorted(stats.items(), key=lambda kv: -kv[1]["ms"]):
        print(f"  {s['ms'] / args.seconds:7.1f} {s['calls'] / args.seconds:8.1f} "
              f"{s['ms'] / max(s['calls'], 1):8.2f}  {key}")
    if profile is not None:
        print("\n".join(summarize_profile(profile)))


if __name__ == "__main__":
    main()
