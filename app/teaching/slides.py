"""Figures for slides: the current view of a run as one 16:9 figure (PNG, SVG, PDF).

A slide is drawn on the server with Matplotlib from the run's recorded frames and its
settings, not captured from the page: it needs no browser, is the same for every
viewer, and its curves are the run's numbers (tested). Its parts, from the bottom up:

* :mod:`app.teaching.slide_page`: the slide's size and formats, its caption's text, a
  figure written as a file (:func:`figure_bytes`);
* :mod:`app.teaching.slide_panels` and :mod:`app.teaching.run_slide`: the slide of a run
  (:class:`SlideRun`, :func:`slide_figure`);
* :mod:`app.teaching.lab_slides`: the inertial lab's slides;
* :mod:`app.teaching.tour_slides`: a tour's slides, headless (:func:`run_frames`,
  :func:`tour_figures`).

This module holds the dashboard's slide (:func:`dashboard_slide`) and its download
buttons, and gives the names of the others to scripts (``from app.teaching.slides import
tour_figures``).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

from .lab_slides import lab_slide_figure, momentum_slide_figure
from .run_slide import SlideRun, informative_frame, slide_figure
from .slide_page import FORMATS, figure_bytes, plain_caption
from .tour_slides import run_frames, slide_stem, tour_figures

if TYPE_CHECKING:  # Matplotlib is imported when a slide is drawn, not with the page
    from matplotlib.figure import Figure

__all__ = ["FORMATS", "SlideRun", "dashboard_slide", "download_buttons", "figure_bytes",
           "informative_frame", "lab_slide_figure", "momentum_slide_figure", "plain_caption",
           "run_frames", "slide_bytes", "slide_figure", "slide_stem", "tour_figures"]


def dashboard_slide(dashboard) -> Figure:
    """The slide of the dashboard's current view: its recorded frames, caption, KL axis,
    colour scale, pinned runs and, in comparison mode, the distance to the reduced model."""
    if not dashboard.history:
        raise ValueError("no frames recorded yet: nothing to draw")
    run = SlideRun.from_frames(dashboard.settings, dashboard.history, dashboard.sim.changes)
    if dashboard.compare:  # the distance plot is shown: its rows (the page's last ROLLOVER)
        ts = dashboard.timeseries  # rows on the page, then those not yet sent
        run.distance = tuple(
            np.concatenate([np.asarray(ts.source.data[k], dtype=float),
                            np.array([row[k] for row in ts.pending], dtype=float)])
            for k in ("distance_t", "distance"))
    pinned = getattr(dashboard, "pinned", None)
    return slide_figure(run, caption=dashboard.caption.object,
                        pinned=pinned.runs if pinned is not None else (),
                        log_kl=dashboard.timeseries.log_kl,
                        color_scale=dashboard.heatmaps.color_scale)


def slide_bytes(dashboard, fmt: str) -> io.BytesIO:
    """The dashboard's slide (:func:`dashboard_slide`) as a file of format ``fmt``."""
    return io.BytesIO(figure_bytes(dashboard_slide(dashboard), fmt))


def download_buttons(dashboard):
    """FileDownload buttons "Slide PNG", "Slide SVG", "Slide PDF" (16:9), named after
    the model and the time of the run like the data downloads (:mod:`app.mainview.export`)."""
    import panel as pn

    from app.mainview.export import filename

    buttons = []
    for fmt in FORMATS:
        button = pn.widgets.FileDownload(filename=f"slide_{filename(dashboard, fmt)}",
                                         label=f"Slide {fmt.upper()}", color="default",
                                         width=86, margin=(5, 3))

        def callback(button=button, fmt=fmt):
            button.filename = f"slide_{filename(dashboard, fmt)}"
            return slide_bytes(dashboard, fmt)

        button.callback = callback
        buttons.append(button)
    return pn.Row(*buttons)
