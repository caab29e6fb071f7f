"""Browser frame rate of the served dashboard: ``python scripts/bench_browser.py``.

Serves ``app/main.py`` with ``panel serve`` on a free port, opens
``?n_tokens=N&dim=d`` in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright) and reports, from one run:

* ``fps``: changes of the attention heatmap's data source seen in the page per
  second (the frames the page received and applied), and ``raf_fps``: animation
  frames the page managed meanwhile (a busy main thread shows up here);
* ``slider_ms``: median time from setting β on the page's slider to the softmax
  heatmap showing a map computed with the new β (each map carries its β; β
  alternates between two values; the run keeps playing);
* ``paint_fps``: repaints of the attention heatmap per second (several frames arriving
  between two animation frames are painted once);
* ``page_ms_per_frame``: main-thread time of the page per frame received (Chrome's
  ``TaskDuration``; also script, style and layout): the page's cost of a frame;
* ``cpu_percent``: CPU of the server process over the window (one session: % of one core);
* ``rss_mb``: resident memory of the server process (and, without a page, its baseline);
* ``sim_fps``: frames per second of the simulation alone (``advance(steps_per_frame)``
  and ``frame()`` for the same settings, one BLAS thread), timed in the same run;
  ``fps / sim_fps`` is the share of the simulation's pace the page achieves.

``--minutes-memory M`` then keeps streaming for M minutes, sampling the server's RSS
every 30 s, and reports MB per session and its growth.  Every figure depends on the
machine: compare configurations side by side, in the same run, as ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from serving import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, served

ROOT = Path(os.environ.get("BENCH_ROOT", Path(__file__).resolve().parents[1]))
#: Default steps per frame of the dashboard (``Dashboard.steps_per_frame``).
STEPS_PER_FRAME = 5
#: The two β values the slider alternates between (log10 on the slider).
BETAS = (0.2, 5.0)

#: Helpers installed in the page: the data sources of the heatmaps by plot title.
PAGE_HELPERS = """
() => {
  if (!window.Bokeh || Bokeh.documents.length === 0) return false;
  const doc = Bokeh.documents[0];
  const models = [...doc._all_models.values()];
  const plotSource = (prefix) => {
    const plot = models.find(m => m.title && m.title.text !== undefined && m.renderers
                             && String(m.title.text).startsWith(prefix));
    const r = plot && plot.renderers.find(r => r.data_source && "image" in r.data_source.data);
    return r && [plot, r.data_source];
  };
  const slider = models.find(m => typeof m.title === "string" && m.title.includes("β")
                             && "value" in m && "start" in m);
  const att = plotSource("Attention"), soft = plotSource("Softmax");
  if (!att || !soft || slider === undefined) return false;
  const view = [...Bokeh.index.all_views()].find(v => v.model === att[0]);
  const softView = [...Bokeh.index.all_views()].find(v => v.model === soft[0]);
  if (view === undefined || softView === undefined) return false;
  window.__bench = {doc, attention: att[1], softmax: soft[1], view, softView, slider};
  return true;
}
"""

#: Counts heatmap data changes and animation frames over ``ms``.
COUNT = """
async (ms) => {
  const b = window.__bench;
  let changes = 0, rafs = 0, paints = 0, running = true;
  const conn = () => { changes += 1; };
  const painted = () => { paints += 1; };
  b.attention.properties.data.change.connect(conn);
  b.view.repainted.connect(painted);
  const raf = () => { rafs += 1; if (running) requestAnimationFrame(raf); };
  requestAnimationFrame(raf);
  const f0 = b.attention.data.frame ? b.attention.data.frame[0] : 0;
  const t0 = performance.now();
  await new Promise(r => setTimeout(r, ms));
  running = false;
  const dt = (performance.now() - t0) / 1000;
  b.attention.properties.data.change.disconnect(conn);
  b.view.repainted.disconnect(painted);
  const f1 = b.attention.data.frame ? b.attention.data.frame[0] : 0;
  return {changes, seconds: dt, fps: changes / dt, paint_fps: paints / dt, raf_fps: rafs / dt,
          frames_sent: f1 - f0};
}
"""

#: Sets log10 β on the slider and waits until the softmax map received a frame computed
#: with that β (the dashboard sends the β of each softmax map along with it) and was
#: painted; returns [ms until the map was received, ms until it was painted].
SLIDER = """
async ([logBeta, timeout]) => {
  const b = window.__bench;
  const beta = Math.pow(10, logBeta);
  const shows = () => {
    const sent = b.softmax.data.beta;
    return sent !== undefined && Math.abs(sent[0] - beta) <= 1e-6 * beta;
  };
  const t0 = performance.now();
  let received = null;
  b.slider.value = logBeta;
  return await new Promise(resolve => {
    const painted = () => {
      b.softView.repainted.disconnect(painted);
      resolve([received, performance.now() - t0]);
    };
    const check = () => {
      if (shows()) {
        received = performance.now() - t0;
        b.softmax.properties.data.change.disconnect(check);
        b.softView.repainted.connect(painted);
      }
    };
    b.softmax.properties.data.change.connect(check);
    setTimeout(() => { b.softmax.properties.data.change.disconnect(check); resolve(null); },
               timeout);
  });
}
"""


def simulation_fps(n_tokens: int, dim: int, steps: int = STEPS_PER_FRAME,
                   seconds: float = 2.0) -> float:
    """Frames per second of ``advance(steps)`` + ``frame()`` alone (one BLAS thread)."""
    from threadpoolctl import threadpool_limits

    sys.path.insert(0, str(ROOT))
    from dynamics import Settings, Simulation

    with threadpool_limits(1):
        sim = Simulation(Settings(n_tokens=n_tokens, dim=dim))
        sim.advance(steps)
        sim.frame()
        frames, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            sim.advance(steps)
            sim.frame()
            frames += 1
        return frames / (time.perf_counter() - t0)


def _rss_mb(proc) -> float:
    return proc.memory_info().rss / 2**20


def _app_file(max_fps: float | None, tmp: Path) -> str:
    """The served script: ``app/main.py``, or a copy with another ``max_fps``."""
    if max_fps is None:
        return "app/main.py"
    path = tmp / "main.py"
    text = (ROOT / "app" / "main.py").read_text()
    path.write_text(text.replace("Dashboard().servable(", f"Dashboard(max_fps={max_fps})"
                                 ".servable("))
    return str(path)


def measure(seconds: float = 10.0, n_tokens: int = 64, dim: int = 16,
            slider_changes: int = 10, minutes_memory: float = 0.0,
            max_fps: float | None = None, warmup: float = 2.0, log=print,
            viewport: dict | None = None) -> dict:
    """Serve the app, open the page and return the figures (see the module docstring).

    ``viewport``: the page's size (``{"width": w, "height": h}``; default
    :data:`serving.VIEWPORT`), e.g. 1280×720 for a projector.
    """
    import psutil
    from playwright.sync_api import sync_playwright

    viewport = viewport or VIEWPORT
    result = {"n_tokens": n_tokens, "dim": dim, "load_average": os.getloadavg()[0],
              "viewport": f"{viewport['width']}x{viewport['height']}"}
    with tempfile.TemporaryDirectory() as tmp:
        with served(Path(tmp) / "panel.log", _app_file(max_fps, Path(tmp)), root=ROOT) as srv:
            server = psutil.Process(srv.proc.pid)
            result["rss_idle_mb"] = _rss_mb(server)
            url = f"{srv.url}?n_tokens={n_tokens}&dim={dim}"
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             headless=True)
                page = browser.new_page(viewport=viewport)
                errors = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(url)
                page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0",
                                       timeout=60000)
                page.wait_for_selector(".bk-Canvas", timeout=60000)
                page.wait_for_function(PAGE_HELPERS, timeout=30000)
                page.wait_for_timeout(1000 * warmup)
                result["rss_mb"] = _rss_mb(server)

                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                before = _metrics(cdp)
                server.cpu_percent(None)
                counts = page.evaluate(COUNT, int(1000 * seconds))
                result["cpu_percent"] = server.cpu_percent(None)
                after = _metrics(cdp)
                frames = max(counts["changes"], 1)
                for key, name in (("TaskDuration", "page_ms_per_frame"),
                                  ("ScriptDuration", "script_ms_per_frame"),
                                  ("RecalcStyleDuration", "style_ms_per_frame"),
                                  ("LayoutDuration", "layout_ms_per_frame")):
                    result[name] = 1e3 * (after[key] - before[key]) / frames
                result["page_busy"] = (after["TaskDuration"] - before["TaskDuration"]) / counts[
                    "seconds"]
                result.update(fps=counts["fps"], paint_fps=counts["paint_fps"],
                              raf_fps=counts["raf_fps"],
                              frames_sent=counts["frames_sent"] / counts["seconds"])
                status = page.get_by_text("frames/s").first.inner_text()
                result["status"] = " ".join(status.split())

                if slider_changes:
                    result.update(slider_latency(page, slider_changes))

                if minutes_memory > 0:
                    result.update(memory_run(page, server, minutes_memory, log))
                result["rss_end_mb"] = _rss_mb(server)
                result["page_errors"] = errors
                page.goto("about:blank")
                browser.close()
        result["server_tracebacks"] = srv.log().count("Traceback")
    result["sim_fps"] = simulation_fps(n_tokens, dim)
    result["fps_over_sim"] = result["fps"] / result["sim_fps"]
    return result


def _metrics(cdp) -> dict:
    """Chrome's cumulative performance metrics of the page (seconds for durations)."""
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def slider_latency(page, changes: int) -> dict:
    """Median milliseconds from a β change on the slider to the softmax map showing it.

    "Showing it" means the page received a softmax map computed with the new β (each map
    carries its β): the latency of the round trip slider → server → simulation → page,
    independent of how fast the dynamics then move (a threshold on the map's values
    would time those too).
    """
    import math

    times, received, misses = [], [], 0
    for k in range(changes):
        beta = BETAS[k % 2]
        ms = page.evaluate(SLIDER, [math.log10(beta), 5000])
        if ms is None:
            misses += 1
        else:
            received.append(ms[0])
            times.append(ms[1])
        page.wait_for_timeout(600)
    page.evaluate("(v) => { window.__bench.slider.value = v; }", 0.0)  # back to β = 1
    return {"slider_ms": statistics.median(times) if times else float("nan"),
            # the map's arrival in the page (the rest, to slider_ms, is waiting to paint)
            "slider_received_ms": statistics.median(received) if received else float("nan"),
            "slider_ms_all": [round(t) for t in times], "slider_misses": misses}


def memory_run(page, server, minutes: float, log) -> dict:
    """Stream for ``minutes``; sample the server's RSS every 30 s."""
    samples = [(0.0, _rss_mb(server))]
    t0 = time.monotonic()
    end = t0 + 60 * minutes
    while time.monotonic() < end:
        page.wait_for_timeout(1000 * min(30.0, end - time.monotonic()))
        samples.append((time.monotonic() - t0, _rss_mb(server)))
        log(f"  memory: {samples[-1][0]:6.0f} s  RSS {samples[-1][1]:7.1f} MB")
    frame = page.evaluate("() => window.__bench.attention.data.frame[0]")
    rss = [s[1] for s in samples]
    half = len(rss) // 2
    return {"memory_samples": [(round(t), round(m, 1)) for t, m in samples],
            "memory_growth_mb": rss[-1] - rss[0],
            "memory_growth_second_half_mb": rss[-1] - rss[half],
            "memory_frames": frame}


def _viewport(text: str) -> dict:
    """``"1280x720"`` → ``{"width": 1280, "height": 720}`` (argparse type)."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--viewport wants WIDTHxHEIGHT, got {text!r}") from None
    if width <= 0 or height <= 0:
        raise argparse.ArgumentTypeError(f"--viewport wants positive sizes, got {text!r}")
    return {"width": width, "height": height}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="counting window (s)")
    parser.add_argument("--n-tokens", type=int, default=64)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--slider-changes", type=int, default=10)
    parser.add_argument("--minutes-memory", type=float, default=0.0,
                        help="then stream this many minutes, sampling RSS each 30 s")
    parser.add_argument("--max-fps", type=float, default=None,
                        help="serve a copy of app/main.py with Dashboard(max_fps=...)")
    parser.add_argument("--viewport", type=_viewport, default=None, metavar="WxH",
                        help="page size, e.g. 1280x720 (default %(default)s: "
                             f"{VIEWPORT['width']}x{VIEWPORT['height']})")
    parser.add_argument("--repeat", type=int, default=1, help="runs (one server each)")
    parser.add_argument("--json", action="store_true", help="print each result as JSON")
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        sys.exit(f"Chromium not found at {CHROMIUM}")
    for _ in range(args.repeat):
        r = measure(args.seconds, args.n_tokens, args.dim, args.slider_changes,
                    args.minutes_memory, args.max_fps, viewport=args.viewport)
        if args.json:
            print(json.dumps(r))
            continue
        print(f"N = {r['n_tokens']}, d = {r['dim']}, {r['viewport']}, load average "
              f"{os.getloadavg()[0]:.1f}: page {r['fps']:.1f} frames/s "
              f"(heatmap painted {r['paint_fps']:.1f}/s, animation frames "
              f"{r['raf_fps']:.0f}/s, server sent {r['frames_sent']:.1f}/s); "
              f"simulation alone {r['sim_fps']:.1f} frames/s; ratio {r['fps_over_sim']:.2f}")
        print(f"  page main thread busy {r['page_busy']:.0%}: {r['page_ms_per_frame']:.1f} ms "
              f"per frame (script {r['script_ms_per_frame']:.1f}, style "
              f"{r['style_ms_per_frame']:.1f}, layout {r['layout_ms_per_frame']:.1f})")
        print(f"  server CPU {r['cpu_percent']:.0f} % of one core; RSS idle "
              f"{r['rss_idle_mb']:.0f} MB, with the session {r['rss_mb']:.0f} MB "
              f"(+{r['rss_mb'] - r['rss_idle_mb']:.0f} MB), at the end {r['rss_end_mb']:.0f} MB")
        if "slider_ms" in r:
            print(f"  slider → softmax map: median {r['slider_ms']:.0f} ms (received "
                  f"{r['slider_received_ms']:.0f} ms) "
                  f"({r['slider_ms_all']}, misses {r['slider_misses']})")
        if "memory_growth_mb" in r:
            print(f"  memory run: growth {r['memory_growth_mb']:+.1f} MB "
                  f"(second half {r['memory_growth_second_half_mb']:+.1f} MB) over "
                  f"{r['memory_frames']} frames; samples {r['memory_samples']}")
        print(f"  status: {r['status']}")
        if r["page_errors"] or r["server_tracebacks"]:
            print(f"  page errors {r['page_errors']}; server tracebacks {r['server_tracebacks']}")


if __name__ == "__main__":
    main()
