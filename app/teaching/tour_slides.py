"""A tour's slides, headless: each step run from ``t = 0`` (:func:`run_frames`, a
preset's quench applied on the way) and drawn as one slide written to files
(:func:`tour_figures`), named after the step's title (:func:`slide_stem`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from app.presets import quench_changes
from app.presets import validate as validate_preset
from dynamics import RUNNING, Settings, Simulation
from dynamics.inertial.experiments import lab_settings, run_lab_experiment
from dynamics.inertial.momentum import MOMENTUM_MODEL, run_momentum_experiment

from .lab_slides import lab_slide_figure, momentum_slide_figure
from .run_record import safe_filename
from .run_slide import SlideRun, slide_figure
from .slide_page import FORMATS, figure_bytes

#: Frames a headless run records for its slide (evenly spread over the run).
TOUR_FRAMES = 500
#: Greek letters of titles spelled out in file names (β stays in "At large β").
GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "eps", "η": "eta",
         "θ": "theta", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "π": "pi",
         "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "ω": "omega", "Δ": "Delta",
         "Σ": "Sigma", "Ω": "Omega", "−": "-"}


def slide_stem(title: str) -> str:
    """A slide's file name (without its number) from its title: Greek letters spelled
    out, a decimal point kept between digits, other signs made ``_``."""
    text = "".join(f"_{GREEK[c]}_" if c in GREEK and c != "−" else GREEK.get(c, c)
                   for c in title)
    text = re.sub(r"\.(?!\d)|(?<!\d)\.", "_", text)  # a dot only between digits
    return re.sub(r"_+", "_", safe_filename(text)).strip("_-") or "slide"


def run_frames(settings: Settings, t_end: float, max_frames: int = TOUR_FRAMES,
               quench: Mapping | None = None):
    """Run ``settings`` from ``t = 0`` to ``t_end`` headless.

    ``quench``: ``{"at_t": t, setting: value, ...}`` (a preset's quench), applied when
    the run reaches ``t`` (a frame is kept just before it); the run continues from its
    state, as on the page, and the change is in ``sim.changes``.

    Returns
    -------
    frames : list of dynamics.Frame
        At most ``max_frames + 2``, evenly spaced in steps (the first and last kept).
    sim : dynamics.Simulation
        The run (its status, message and changes).
    """
    if not (isinstance(t_end, int | float) and math.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
    sim = Simulation(settings.copy())  # a quench changes the run's own settings only
    n_steps = max(1, int(round(t_end / settings.dt)))
    every = max(1, math.ceil(n_steps / max_frames))
    quench_step = None if quench is None else int(round(quench["at_t"] / settings.dt))
    frames = [sim.frame()]
    done = 0
    while done < n_steps and sim.status == RUNNING:
        chunk = min(every, n_steps - done)
        if quench_step is not None and done + chunk >= quench_step:
            sim.advance(quench_step - done)  # to the quench (possibly 0 steps)
            done = quench_step
            if frames[-1].t != sim.t:
                frames.append(sim.frame())
            sim.settings.param.update(**quench_changes(quench))
            sim.sync()
            quench_step = None
            continue
        sim.advance(chunk)
        done += chunk
        frames.append(sim.frame())
    return frames, sim


def tour_figures(steps: Iterable[Mapping], out_dir, formats=("png", "svg")) -> list[Path]:
    """Run each step headless and write its slide: a tour's slides at once.

    Parameters
    ----------
    steps : iterable of mapping
        Each with ``"settings"`` (a mapping of settings; the others keep their
        defaults) and ``"t_end"`` (> 0); optional ``"title"`` (names the file),
        ``"caption"`` or ``"text"`` (shown under the slide's title), ``"annotations"``
        (a tour step's, :func:`slide_figure`) and ``"quench"`` (a preset's quench,
        :func:`run_frames`; marked on the time plots); a step
        with ``"lab_settings"`` instead (the inertial lab's settings) gets the lab's
        slide (:func:`lab_slide_figure`; the base case's, :func:`momentum_slide_figure`,
        for the momentum_quadratic model).
    out_dir : path
        Created if missing.
    formats : iterable of str
        Among :data:`FORMATS`.

    Returns
    -------
    list of pathlib.Path
        The files written, ``NN_<title>.<format>`` (NN the step's number from 01; the
        title as :func:`slide_stem` spells it). The maps are taken where they show the
        run (:func:`informative_frame`), their time said in their titles.

    Raises
    ------
    ValueError
        A step without valid settings or ``t_end`` (the message names the step), or an
        unknown format; nothing is written for any step then.
    """
    formats = tuple(formats)
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    checked = []
    for i, step in enumerate(steps, 1):
        if not isinstance(step, Mapping):
            raise ValueError(f"tour step {i}: expected a mapping, got {type(step).__name__}")
        try:
            if "lab_settings" in step:  # the lab's slide
                checked.append((i, step, lab_settings(dict(step["lab_settings"])), None))
                continue
            settings = Settings.from_mapping(dict(step.get("settings", {})))
            t_end = step.get("t_end")
            if not (isinstance(t_end, int | float) and not isinstance(t_end, bool)
                    and math.isfinite(t_end) and t_end > 0):
                raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
            quench = step.get("quench")
            if quench is not None:
                problems = validate_preset({"name": "quench", "caption": "", "settings": dict(
                    step.get("settings", {})), "quench": quench})
                if problems:
                    raise ValueError("; ".join(problems))
        except (TypeError, ValueError) as err:
            raise ValueError(f"tour step {i}: {err}") from None
        checked.append((i, step, settings, float(t_end)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, step, settings, t_end in checked:
        caption = str(step.get("caption", step.get("text", "")))
        if t_end is None and settings.model == MOMENTUM_MODEL:  # the lab's base case
            fig = momentum_slide_figure(run_momentum_experiment(settings),
                                        str(step.get("title", "Momentum on a quadratic")),
                                        caption)
        elif t_end is None:
            fig = lab_slide_figure(run_lab_experiment(settings),
                                   str(step.get("title", "Inertial lab")), caption)
        else:
            frames, sim = run_frames(settings, t_end, quench=step.get("quench"))
            run = SlideRun.from_frames(settings, frames, sim.changes, informative=True)
            fig = slide_figure(run, caption=caption,
                               annotations=step.get("annotations", ()))
        stem = f"{i:02d}_{slide_stem(str(step.get('title', settings.model)))}"
        for fmt in formats:
            path = out / f"{stem}.{fmt}"
            path.write_bytes(figure_bytes(fig, fmt))
            written.append(path)
    return written
