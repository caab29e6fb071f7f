"""What a person sees on the page, read from pixels (the browser tier's helper).

* :func:`plot_frames`: every Bokeh plot drawn on the page, with its title and the
  rectangle of its data area (the *frame*, inside the axes) in viewport pixels.
* :func:`data_pixels`: how many pixels of a frame carry data — lines, markers, patches,
  heatmaps — rather than the frame's background, its grid, its outline, its legend or a
  text note drawn over it. Axes, ticks and titles lie outside the frame; legends and
  text annotations inside it are masked, so "a legend and scraps of axis labels" count 0.
* :func:`assert_plots_show_data`: every visible plot (or the named ones) shows data.
* :func:`assert_no_sideways_scroll`, :func:`assert_fits_viewport`: the page as a screen.

A pixel is *ink* where it differs from the frame's background by more than
:data:`INK` in some channel. Ink counts as data where it is coloured (chroma at least
:data:`CHROMA`: every line, marker and colour map of the app), or dark (a black
reference line or marker: luminance below :data:`DARK`). Grey grid lines and the grey
text of a note are neither. A single marker of size 7 covers about 40 pixels; a
uniform heatmap fills its whole frame.

Only plots in the viewport can be seen: each plot is scrolled into view before its
frame is captured (:func:`plots_data`: one screenshot per scroll position, every plot
wholly inside it read from it). A plot that is shown but squeezed to nothing (a frame of zero size)
counts as blank: it is listed, with 0 data pixels.
"""

from __future__ import annotations

import io
import time

import numpy as np

#: A channel difference from the background beyond this is ink (0–255).
INK = 40
#: max − min of the channels at or above this is a colour (grey lines and text are below).
CHROMA = 40
#: Luminance below this is a dark line or marker (black data), not grey text or grid.
DARK = 80
#: Pixels of data a plot must show by default (a marker of size 7 gives ~40).
MIN_PIXELS = 25
#: Seconds :func:`assert_plots_show_data` reads again for by default: a restarted run's
#: time series reach the page every 8 frames (2 s at the browser tier's 4 frames/s), and
#: a page just opened is drawing its first frames. A plot that stays blank still fails.
DATA_TIMEOUT = 10.0

#: Page script: each plot view's title, its frame in viewport pixels, its background and
#: the rectangles (viewport pixels) of the legends and text annotations drawn over it.
#: ``only``: restrict to plots whose title starts with one of these strings.
FRAMES = """
(args) => {
  const [only, scroll] = args;
  const kinds = new Set(["Legend", "Label", "LabelSet", "Title", "ToolbarPanel"]);
  const out = [];
  const plots = [...Bokeh.index.query(v => v.frame_view != null && v.canvas_view != null)];
  for (const pv of plots) {
    const el = pv.canvas_view.el;
    const title = (pv.model.title && pv.model.title.text) || "";
    if (only != null && !only.some(s => title.startsWith(s))) continue;
    // in a hidden tab, a closed drawer or a hidden figure: nobody can see it
    if (!el.isConnected || !pv.model.visible) continue;
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    if (scroll) el.scrollIntoView({block: "center", inline: "nearest"});
    const r = el.getBoundingClientRect();
    const b = pv.frame_view.bbox;
    const masks = [];
    for (const v of Bokeh.index.query(w => w.plot_view === pv)) {
      const kind = String(v.model.type).split(".").pop();
      if (!kinds.has(kind) || v.model.visible === false) continue;
      if (v.el && v.el.isConnected && v.el.getClientRects().length) {
        const m = v.el.getBoundingClientRect();
        masks.push([m.left, m.top, m.width, m.height]);
      }
      if (v.bbox && v.bbox.width > 0) {
        masks.push([r.left + v.bbox.x, r.top + v.bbox.y, v.bbox.width, v.bbox.height]);
      }
    }
    out.push({id: pv.model.id, title: title, x: r.left + b.x, y: r.top + b.y,
              width: b.width, height: b.height,
              background: pv.model.background_fill_color, masks: masks});
  }
  return out;
}
"""


def _rgb(color) -> tuple[int, int, int]:
    """A Bokeh colour (``#rrggbb``, a CSS name Bokeh sends as such, or an RGB(A) list)."""
    if isinstance(color, list | tuple):
        return tuple(int(c) for c in color[:3])
    if isinstance(color, str) and color.startswith("#") and len(color) >= 7:
        return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    return (255, 255, 255)  # "white", None or a name: Bokeh's default background


def count_data_pixels(image: np.ndarray, background=(255, 255, 255),
                      masks: list[np.ndarray] | None = None) -> int:
    """Pixels of ``image`` (H × W × 3, uint8) that carry data against ``background``.

    ``masks``: boolean H × W arrays of pixels to ignore (legends, text notes).
    """
    rgb = image[..., :3].astype(np.int16)
    ink = np.abs(rgb - np.asarray(background, dtype=np.int16)).max(axis=-1) > INK
    chroma = rgb.max(axis=-1) - rgb.min(axis=-1)
    luminance = rgb @ np.array([0.299, 0.587, 0.114])
    data = ink & ((chroma >= CHROMA) | (luminance < DARK))
    for mask in masks or ():
        data &= ~mask
    return int(data.sum())


def plot_frames(page, only: list[str] | None = None, scroll: bool = False) -> list[dict]:
    """The visible plots of ``page`` (see :data:`FRAMES`); ``only``: title prefixes."""
    return page.evaluate(FRAMES, [only, scroll])


def _scroll_to(page, frame: dict) -> None:
    """Scroll the plot of ``frame`` (one entry of :func:`plot_frames`) into view, below the
    tour's banner where it is shown (it stays at the window's top: its coloured border
    over a plot would read as data)."""
    page.evaluate("""(id) => {
      let covered = 0;
      for (const b of Bokeh.index.query(b => (b.model.css_classes || []).includes("tour")))
        if (b.el && b.el.isConnected)
          covered = Math.max(covered, b.el.getBoundingClientRect().bottom);
      for (const v of Bokeh.index.query(v => v.model.id === id && v.canvas_view != null)) {
        v.canvas_view.el.scrollIntoView({block: "center", inline: "nearest"});
        const top = v.canvas_view.el.getBoundingClientRect().top;
        if (top < covered + 2) window.scrollBy(0, top - covered - 2);
      }
    }""", frame["id"])


def _screenshot(page) -> tuple[np.ndarray, float]:
    """The viewport as an RGB array, and its device pixels per CSS pixel."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(page.screenshot())).convert("RGB"))
    return image, image.shape[1] / page.viewport_size["width"]


def data_pixels(page, frame: dict) -> int:
    """Data pixels in ``frame`` (one entry of :func:`plot_frames`) as the screen shows it
    now; the plot is scrolled into view first. Its outline (2 px) is left out."""
    _scroll_to(page, frame)
    [frame] = [f for f in plot_frames(page) if f["id"] == frame["id"]] or [frame]
    image, scale = _screenshot(page)
    return _frame_pixels(image, frame, scale, page.viewport_size)


def _frame_pixels(image: np.ndarray, frame: dict, scale: float, view: dict) -> int:
    """Data pixels of ``frame`` in ``image``, a screenshot of the whole viewport
    (``scale`` device pixels per CSS pixel); the frame's outline (2 px) is left out and
    only its part inside the viewport is read."""
    x0, y0 = max(frame["x"] + 2, 0), max(frame["y"] + 2, 0)
    x1 = min(frame["x"] + frame["width"] - 2, view["width"])
    y1 = min(frame["y"] + frame["height"] - 2, view["height"])
    if x1 - x0 < 1 or y1 - y0 < 1:
        return 0
    c0, r0, c1, r1 = (int(round(v * scale)) for v in (x0, y0, x1, y1))
    crop = image[r0:r1, c0:c1]
    h, w = crop.shape[:2]
    masks = []
    for mx, my, mw, mh in frame["masks"]:
        mask = np.zeros((h, w), dtype=bool)
        m0, n0 = int((mx - x0) * scale) - 1, int((my - y0) * scale) - 1
        m1, n1 = int((mx + mw - x0) * scale) + 2, int((my + mh - y0) * scale) + 2
        mask[max(n0, 0):max(n1, 0), max(m0, 0):max(m1, 0)] = True
        masks.append(mask)
    return count_data_pixels(crop, _rgb(frame["background"]), masks)


def _inside(frame: dict, view: dict) -> bool:
    """Whether ``frame`` lies wholly inside the viewport."""
    return (frame["x"] >= 0 and frame["y"] >= 0 and frame["width"] > 0
            and frame["x"] + frame["width"] <= view["width"]
            and frame["y"] + frame["height"] <= view["height"])


def plots_data(page, only: list[str] | None = None) -> dict[str, int]:
    """``{title (or id): data pixels}`` of every visible plot of ``page``.

    One screenshot per scroll position, not one per plot: the first plot not yet read
    is scrolled into view, and every plot then wholly inside the viewport is read from
    the same screenshot (:func:`data_pixels` reads one plot alone)."""
    view = page.viewport_size
    counts: dict[str, int] = {}
    done: set[str] = set()
    frames = plot_frames(page, only)
    for _ in range(len(frames) + 1):  # each pass reads at least one plot
        left = [f for f in frames if f["id"] not in done]
        if not left:
            break
        if not _inside(left[0], view):  # bring the next plot in (others stay put)
            _scroll_to(page, left[0])
            frames = plot_frames(page, only)
            left = [f for f in frames if f["id"] not in done]
        image, scale = _screenshot(page)
        for i, frame in enumerate(left):
            if i == 0 or _inside(frame, view):
                counts[frame["title"] or frame["id"]] = _frame_pixels(image, frame, scale, view)
                done.add(frame["id"])
    return counts


def assert_plots_show_data(page, only: list[str] | None = None, min_pixels: int = MIN_PIXELS,
                           at_least: int = 1,
                           timeout: float = DATA_TIMEOUT) -> dict[str, int]:
    """Every visible plot of ``page`` (``only``: those whose title starts so) shows at
    least ``min_pixels`` pixels of data; at least ``at_least`` plots are checked.
    ``timeout``: read again (every half second) until that holds or this many seconds
    have passed (:data:`DATA_TIMEOUT`: a page opening, or a run just restarted, has its
    data on their way). Returns the counts."""
    deadline = time.monotonic() + timeout
    while True:
        counts = plots_data(page, only)
        blank = {title: n for title, n in counts.items() if n < min_pixels}
        if (len(counts) >= at_least and not blank) or time.monotonic() >= deadline:
            break
        page.wait_for_timeout(500)
    assert len(counts) >= at_least, f"{len(counts)} plots visible, {at_least} expected: {counts}"
    assert not blank, f"plots with no data drawn (data pixels): {blank}; all: {counts}"
    return counts


def page_width(page) -> dict[str, int]:
    """The document's scroll width and the viewport's width (CSS pixels)."""
    return page.evaluate("""() => ({scroll: Math.max(document.documentElement.scrollWidth,
                                                     document.body.scrollWidth),
                                     view: window.innerWidth})""")


def assert_no_sideways_scroll(page) -> None:
    """The page is no wider than the window (nothing to scroll sideways to)."""
    size = page_width(page)
    assert size["scroll"] <= size["view"], f"the page scrolls sideways: {size}"


def assert_fits_viewport(page) -> None:
    """Nothing to scroll at all: the document, and every element that scrolls, fit."""
    size = page.evaluate("""() => {
        const over = [...document.querySelectorAll('*')].filter(e => {
            const s = getComputedStyle(e);
            return /(auto|scroll)/.test(s.overflowY + s.overflowX)
                   && (e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1)
                   && e.clientHeight > 0;
        }).map(e => `${e.tagName}.${e.className}: ${e.scrollWidth}x${e.scrollHeight}`
                    + ` in ${e.clientWidth}x${e.clientHeight}`);
        return {width: document.documentElement.scrollWidth,
                height: document.documentElement.scrollHeight,
                view_width: window.innerWidth, view_height: window.innerHeight, over: over};
    }""")
    assert size["width"] <= size["view_width"] and size["height"] <= size["view_height"] \
        and not size["over"], f"the page does not fit the window: {size}"
