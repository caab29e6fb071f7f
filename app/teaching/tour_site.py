"""The lecture as a static site: ``python -m app tour-html DIR`` writes ``index.html`` (the
tour's steps, their titles and one-line claims, each linking to its page) and one page per
step, as :mod:`app.teaching.standalone_page` writes a run (a lab step: the inertial lab's
plots), linked by Back / Next and the arrow keys ← →. The folder needs no server: put it
on any static host, or send it as a zip.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from bokeh.layouts import column, row

from app.lab.attention_plots import AttentionPlots
from app.lab.inertial_lab import CONTROLS
from app.lab.momentum_plots import MomentumPlots
from dynamics import Settings, models
from dynamics.inertial.experiments import lab_settings, run_lab_experiment
from dynamics.inertial.momentum import MOMENTUM_MODEL, run_momentum_experiment

from .standalone_page import (
    STYLE,
    UnwritableOutput,
    nav_html,
    page_html,
    run_html,
    settings_run,
    write_page,
)
from .tour import checked_tour, slide_steps
from .tour_slides import slide_stem

INDEX = "index.html"


def claim_line(text: str) -> str:
    """The first sentence of a step's text (its one-line claim on the index)."""
    first = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]
    return first


def lab_html(values: dict, title: str, caption: str, nav: str) -> str:
    """The page of a lab step: the inertial lab's plots at its settings ``values``."""
    settings = lab_settings(dict(values))
    if settings.model == MOMENTUM_MODEL:
        plots = MomentumPlots()
        status = plots.show(run_momentum_experiment(settings))
    else:
        plots = AttentionPlots()
        status = plots.show(run_lab_experiment(settings))
    figures = list(plots.figures)
    layout = column(*(row(*figures[i:i + 3], sizing_mode="stretch_width")
                      for i in range(0, len(figures), 3)), sizing_mode="stretch_width",
                    name="page")
    shown = ("model", "kernel_diag", "value_diag", *CONTROLS)
    line = " · ".join(f"{k} = {getattr(settings, k)}" for k in shown if k in settings.param)
    equations = models.get(settings.model).equations
    return page_html(layout, title, caption, line, equations, nav=nav,
                     note=re.sub(r"<[^>]+>", "", str(status)))


def index_html(tour: dict, names: list[str]) -> str:
    """The site's first page: the tour's name and every step's title and claim."""
    items = "\n".join(
        f'<li><a href="{html.escape(name)}">{html.escape(step["title"])}</a>'
        f"<br><span>{html.escape(claim_line(step['text']))}</span></li>"
        for step, name in zip(tour["steps"], names, strict=True))
    first = html.escape(names[0]) if names else INDEX
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(tour['name'])}</title>
<style>{STYLE}
li {{ margin: 0 0 12px; max-width: 60em; }} li a {{ font-weight: 600; color: #2a6fdb; }}
</style></head>
<body><header><h1>{html.escape(tour['name'])}</h1>
<p>{len(names)} steps, each a page that plays its run offline: open a step, move its time
slider or press Play; Back / Next or the arrow keys ← → go through the lecture.</p>
</header>
<nav><a rel="next" href="{first}">Start ▶</a></nav>
<ol>
{items}
</ol>
<script>document.addEventListener("keydown", (e) => {{
  if (e.key === "ArrowRight") window.location.href = "{first}"; }});</script>
</body></html>
"""


def tour_pages(tour: dict | None = None) -> dict[str, str]:
    """``{file name: page}`` of every file of the site of ``tour`` (default: the shipped
    one), in order, ``index.html`` first.

    Raises
    ------
    ValueError
        The tour is not valid (every problem listed).
    """
    tour, presets = checked_tour(tour)
    slides, skipped = slide_steps(tour, presets)
    if skipped:  # (validated: none)
        raise ValueError("\n".join(skipped))
    steps = tour["steps"]
    names = [f"{i:02d}_{slide_stem(step['title'])}.html" for i, step in enumerate(steps, 1)]
    pages = {INDEX: index_html(tour, names)}
    for i, (step, slide, name) in enumerate(zip(steps, slides, names, strict=True)):
        nav = nav_html(names[i - 1] if i else INDEX, INDEX,
                       names[i + 1] if i + 1 < len(names) else None,
                       f"step {i + 1} of {len(names)}")
        title = f"{i + 1}. {step['title']}"
        if "lab_settings" in slide:
            pages[name] = lab_html(slide["lab_settings"], title, step["text"], nav)
            continue
        run = settings_run(_settings(slide["settings"]), float(slide["t_end"]),
                           slide.get("quench"))
        pages[name] = run_html(run, title, step["text"], nav, slide["annotations"])
    return pages


def _settings(values: dict) -> Settings:
    return Settings.from_mapping(dict(values))


def tour_html(out_dir, tour: dict | None = None) -> list[Path]:
    """Write the site of ``tour`` into ``out_dir`` (created if missing): every page is
    built before the first is written, and each file is written atomically.

    Returns
    -------
    list of pathlib.Path
        The files written, ``index.html`` first.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UnwritableOutput(f"{out} is a file, not a folder to write into")
    pages = tour_pages(tour)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UnwritableOutput(f"cannot create {out}: {err.strerror or err}") from None
    return [write_page(out / name, text) for name, text in pages.items()]


__all__ = ["INDEX", "claim_line", "index_html", "lab_html", "tour_html", "tour_pages"]
