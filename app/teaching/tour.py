"""The guided tour: a lecture as a sequence of steps stored as data
(``assets/tours/lecture.json``), so a teacher can write a tour without code.

A tour is ``{"name", "steps": [...]}``; a step is::

    {"title": "...", "text": "what to look for",
     "preset": "<a preset of the main tab>"        (or, with "tab": "lab",
     "lab_preset": "<a preset of the inertial lab>"),
     "annotations": ["kl_slope", ...],              (app.mainview.guides.ANNOTATIONS)
     "plots": ["kl", ...],                          (the plots the text names: see below)
     "claim": {"kind": "...", ...},                 (checked by tests/test_tour.py)
     "t_end": 10.0}                                 (a main-tab step: the run pauses there)

Back/Next (and the arrow keys ← →, unless a widget such as a slider has the focus) move
through it; the step is in the URL
(``?tour_step=4`` opens a class at step 4). :func:`validate_tour` names every problem of a
tour file; a tour with a problem is not offered.

A step's ``plots`` names the plots its text speaks of, the one the class should look at
first (the evidence) first: the main tab's by :data:`app.mainview.layout.PLOT_NAMES`, the
lab's by :data:`app.lab.plot_area.NAMES`. When the step opens the page scrolls that first
plot into view (at 1280×720 the main tab's plots do not all fit), and projector mode,
which keeps fewer and larger plots, keeps every plot the step names.

A main-tab step's run pauses at its ``t_end`` (else its preset's), with what the step is
about still on the plots; the banner shows the time against that end and a Replay button.
"""

from __future__ import annotations

import json
import math
from importlib.resources.abc import Traversable
from pathlib import Path

import panel as pn

from app import presets as presets_module
from app.lab.inertial_lab import load_presets as load_lab_presets
from app.lab.plot_area import NAMES as LAB_PLOTS
from app.mainview.guides import ANNOTATIONS
from app.mainview.layout import PLOT_NAMES, named_figures
from app.serving.resources import asset, read_asset
from app.serving.server import locked
from dynamics.noise import small_noise_kl, stationary_variance

from .tour_keys import ArrowKeys, ScrollTo

#: The tour shipped with the app.
TOUR_FILE = asset("tours", "lecture.json")
STEP_FIELDS = ("title", "text", "preset", "tab", "lab_preset", "annotations", "plots",
               "claim", "t_end")
#: Time a step's slide is run to (``"t_end"`` of the step, else this).
SLIDE_T_END = 10.0
TABS = ("main", "lab")
#: The banner stays at the top of the window while the page scrolls (a step scrolls to
#: the plot it names: the step's text and clock stay in view above it, issue #35).
STICKY = {"position": "sticky", "top": "0", "z-index": "20"}
#: Type of the banner in projector mode at 1280×720 (scaled with the plots above it).
PROJECTOR_FONT = 18
_CSS = read_asset("style.css")


def load_tour(path: str | Traversable | None = None) -> dict:
    """The tour of ``path`` (default :data:`TOUR_FILE`), unvalidated.

    Raises ``OSError`` or ``ValueError`` (not JSON).
    """
    path = TOUR_FILE if path is None else path
    if isinstance(path, str):
        path = Path(path)
    return json.loads(path.read_text(encoding="utf-8"))


def validate_tour(tour, presets: list[str], lab_presets: list[str]) -> list[str]:
    """Every problem of ``tour``, given the names of the main tab's and the lab's presets."""
    if not isinstance(tour, dict) or not isinstance(tour.get("steps"), list):
        return ['a tour must be a JSON object with a list "steps"']
    errors = [] if isinstance(tour.get("name"), str) else ['a tour needs a "name"']
    if not tour["steps"]:
        errors.append("the tour has no step")
    for i, step in enumerate(tour["steps"], start=1):
        where = f"step {i}"
        if not isinstance(step, dict):
            errors.append(f"{where}: must be an object")
            continue
        errors += [f"{where}: unknown field {k!r}" for k in step if k not in STEP_FIELDS]
        errors += [f"{where}: {k!r} must be a text" for k in ("title", "text")
                   if not isinstance(step.get(k), str)]
        tab = step.get("tab", "main")
        if tab not in TABS:
            errors.append(f"{where}: tab must be one of {', '.join(TABS)}, got {tab!r}")
        elif tab == "main" and step.get("preset") not in presets:
            errors.append(f"{where}: no preset of the main tab named {step.get('preset')!r}")
        elif tab == "lab" and step.get("lab_preset") not in lab_presets:
            errors.append(f"{where}: no preset of the lab named {step.get('lab_preset')!r}")
        annotations = step.get("annotations", [])
        if not isinstance(annotations, list):
            errors.append(f"{where}: annotations must be a list")
        else:
            errors += [f"{where}: unknown annotation {a!r} (known: {', '.join(ANNOTATIONS)})"
                       for a in annotations if a not in ANNOTATIONS]
        plots = step.get("plots", [])
        known = LAB_PLOTS if tab == "lab" else PLOT_NAMES
        if not isinstance(plots, list):
            errors.append(f"{where}: plots must be a list")
        else:
            errors += [f"{where}: unknown plot {p!r} (known: {', '.join(known)})"
                       for p in plots if p not in known]
        if tab == "lab" and annotations:
            errors.append(f"{where}: annotations are drawn on the main tab only")
        problem = presets_module.t_end_problem(step.get("t_end", SLIDE_T_END))
        if problem:
            errors.append(f"{where}: {problem}")
    return errors


def slide_steps(tour: dict, presets: list[dict],
                lab_presets: list[dict] | None = None) -> tuple[list[dict], list[str]]:
    """The steps of ``tour`` as slides (:func:`app.teaching.slides.tour_figures`): a step of the
    main tab its run (its quench applied and marked), a lab step the lab's plots at its
    preset (``lab_presets``, default the shipped ones); and the steps that have none
    (a preset that does not exist), with why."""
    by_name = {p.get("name"): p for p in presets if isinstance(p, dict)}
    lab_by_name = {p["name"]: p for p in (
        load_lab_presets()[0] if lab_presets is None else lab_presets)}
    slides, skipped = [], []
    for i, step in enumerate(tour["steps"], start=1):
        text = f"{step['title']}. {step['text']}"
        if step.get("tab", "main") == "lab":
            lab = lab_by_name.get(step.get("lab_preset"))
            if lab is None:
                skipped.append(f"step {i} ({step['title']}): no lab preset, no slide")
            else:
                slides.append({"title": step["title"], "text": text,
                               "lab_settings": dict(lab["settings"])})
            continue
        preset = by_name.get(step.get("preset"))
        if preset is None:
            skipped.append(f"step {i} ({step['title']}): no preset, no slide")
            continue
        slides.append({"title": step["title"], "text": text,
                       "settings": presets_module.preset_values(preset),
                       "t_end": step.get("t_end", SLIDE_T_END),
                       "annotations": list(step.get("annotations", []))})
        if "quench" in preset:
            slides[-1]["quench"] = dict(preset["quench"])
    return slides, skipped


def checked_tour(tour: dict | None = None) -> tuple[dict, list[dict]]:
    """``tour`` (default the shipped one) and the main tab's presets, once the tour is
    checked against them and the lab's presets (``ValueError`` listing every problem)."""
    tour = load_tour() if tour is None else tour
    presets = presets_module.load_presets()
    problems = validate_tour(tour, [p.get("name") for p in presets],
                             [p["name"] for p in load_lab_presets()[0]])
    if problems:
        raise ValueError("the tour is not valid:\n" + "\n".join(problems))
    return tour, presets


def export_slides(out_dir, formats=("png", "svg"), tour: dict | None = None) -> list[Path]:
    """Write the slides of ``tour`` (default the shipped one) into ``out_dir``: every
    step, run headless (about 3 s a step; a lab step: the lab's plots). Prints the steps
    skipped."""
    from .tour_slides import tour_figures  # matplotlib: loaded only to draw slides

    tour, presets = checked_tour(tour)
    steps, skipped = slide_steps(tour, presets)
    for line in skipped:
        print(line)
    return tour_figures(steps, out_dir, formats)


class Tour(pn.viewable.Viewer):
    """The tour panel of ``dashboard``: the step's title and text, Back, Next and End.

    The step shown is ``dashboard.tour_step`` (0: no tour), which is in the URL.
    """

    def __init__(self, dashboard, tour: dict | None = None, **params):
        super().__init__(**params)
        self.dashboard = dashboard
        self.problems = []
        try:
            self.tour = load_tour() if tour is None else tour
        except (OSError, ValueError) as exc:
            self.tour, self.problems = {"name": "", "steps": []}, [f"tour not read: {exc}"]
        self.steps = self.tour.get("steps", []) if not self.problems else []
        self.title = pn.pane.Markdown("", margin=(0, 10), sizing_mode="stretch_width",
                                      css_classes=["tour-title"], stylesheets=[_CSS])
        self.text = pn.pane.Markdown("", margin=(0, 10), sizing_mode="stretch_width",
                                     css_classes=["tour-text"], stylesheets=[_CSS])
        self.back = pn.widgets.Button(label="◀ Back", width=90)
        self.next = pn.widgets.Button(label="Next ▶", color="primary", width=90)
        self.end = pn.widgets.Button(label="End tour", width=90)
        # the run's clock against the step's end (TensorFlow Playground's epoch counter)
        # and Replay: the run pauses at its end with the evidence in view
        self.clock = pn.pane.Markdown("", margin=(0, 10), css_classes=["tour-clock"],
                                      stylesheets=[_CSS])
        self.replay = pn.widgets.Button(label="↺ Replay", width=90)
        self.replay.on_click(locked(lambda event: self.dashboard.replay()))
        self.keys = ArrowKeys(width=0, height=0, margin=0)
        self.scroll = ScrollTo(width=0, height=0, margin=0)  # the step's plot into view
        self.back.on_click(locked(lambda event: self.go(-1)))
        self.next.on_click(locked(lambda event: self.go(+1)))
        self.end.on_click(locked(lambda event: self.dashboard.param.update(tour_step=0)))
        self.keys.param.watch(locked(lambda event: self.go(+1)), "forward")
        self.keys.param.watch(locked(lambda event: self.go(-1)), "back")
        dashboard.param.watch(self._on_projector, "projector")
        self._panel = pn.Column(
            pn.Row(self.back, self.next, self.end, self.title, self.replay, self.clock,
                   self.keys, self.scroll, sizing_mode="stretch_width"),
            self.text, css_classes=["tour"], sizing_mode="stretch_width", visible=False,
            styles={"border-left": "4px solid #2a6fdb", "background": "#f3f7ff",
                    "padding": "4px 0", **STICKY})

    def restyle(self, projector: bool, scale: float = 1.0) -> None:
        """The banner's type: the page's in normal mode, :data:`PROJECTOR_FONT` px times
        ``scale`` in projector mode (it stayed ~12 px there, issue #35)."""
        for pane, base in ((self.title, "tour-title"), (self.text, "tour-text"),
                           (self.clock, "tour-clock")):
            classes = [base, "tour-projector"] if projector else [base]
            size = {"font-size": f"{round(PROJECTOR_FONT * scale)}px"} if projector else {}
            if pane.css_classes != classes or pane.styles != size:
                pane.param.update(css_classes=classes, styles=size)

    _window_watched = False

    def _on_projector(self, *events) -> None:
        projector = getattr(self.dashboard, "projector_mode", None)
        if projector is not None and not self._window_watched:  # (built after the tour)
            self._window_watched = True
            projector.window.param.watch(self._on_projector, ["inner_width", "inner_height"])
        scale = projector.scale if projector is not None else 1.0
        self.restyle(self.dashboard.projector, scale)

    def validate(self, presets, lab_presets) -> list[str]:
        """Problems of the tour (none: it is offered); a bad tour has no steps."""
        self.problems += validate_tour(self.tour, presets, lab_presets) if self.steps else []
        if self.problems:
            self.steps = []
        return self.problems

    def go(self, delta: int) -> None:
        """Move ``delta`` steps (within the tour; outside a tour the keys do nothing)."""
        step = self.dashboard.tour_step
        if step == 0 or not self.steps:
            return
        self.dashboard.tour_step = min(max(step + delta, 1), len(self.steps))

    def show(self, number: int) -> bool:
        """Show step ``number`` (1-based; 0 hides the tour): its preset, tab, text and
        annotations. ``False`` if there is no such step."""
        dashboard = self.dashboard
        if number == 0 or not self.steps:
            self._panel.visible = False
            dashboard.timeseries.guides.show(())
            return number == 0
        if not 1 <= number <= len(self.steps):
            return False
        step = self.steps[number - 1]
        self.title.object = (f"**Tour {number}/{len(self.steps)}: {step['title']}**  "
                             "(← → keys)")
        self.text.object = step["text"]
        self.back.disabled = number == 1
        self.next.disabled = number == len(self.steps)
        self._panel.visible = True
        self._on_projector()  # (a page opened in projector mode)
        lab_step = step.get("tab", "main") == "lab"
        self.replay.visible = self.clock.visible = not lab_step  # (the lab runs at once)
        if lab_step:
            dashboard.timeseries.guides.show(())
            fresh = dashboard.lab is None  # built by show_lab now
            lab = dashboard.show_lab()
            if lab is not None:
                # the same preset again: load it anew, unless the lab was built just now
                # with it (run and laid out in this same change: a second run's data
                # reached the page before the plots holding them, and the page raised
                # "reference … isn't known", issue #35)
                if lab.preset == step["lab_preset"] and not fresh:
                    lab.preset = None
                lab.preset = step["lab_preset"]
        else:
            dashboard.show_main()
            preset = next(p for p in dashboard.presets if p.get("name") == step["preset"])
            dashboard.load_preset(preset)
            dashboard.run_end = step.get("t_end", preset.get("t_end"))
            s = dashboard.settings
            annotations = step.get("annotations", [])
            level = math.nan  # the noise's predicted level (Theory page: stochastic logits)
            if "noise_level" in annotations:
                level = small_noise_kl(dashboard.sim.frame().softmax,
                                       stationary_variance(s.logit_noise, s.gamma / s.beta))
            dashboard.timeseries.guides.show(annotations, s.gamma / s.beta, level)
            projector = getattr(dashboard, "projector_mode", None)
            if projector is not None and dashboard.projector:
                projector.follow()  # (the same preset as the step before: no new run)
        self._scroll_to_focus()
        return True

    @property
    def step(self) -> dict | None:
        """The step shown (``None`` outside a tour)."""
        number = self.dashboard.tour_step
        return self.steps[number - 1] if self.steps and 1 <= number <= len(self.steps) else None

    def named_figures(self, log_kl: bool | None = None) -> list:
        """The main tab's figures the step shown names (its ``plots``, in order; ``"kl"``
        on the logarithmic axis if ``log_kl``, default the page's choice); none for a lab
        step or outside a tour."""
        step = self.step
        if step is None or step.get("tab", "main") != "main":
            return []
        figures = named_figures(self.dashboard, log_kl)
        return [figures[name] for name in step.get("plots", [])]

    def focus_figure(self):
        """The figure the step shown names first (scrolled into view when it opens), or
        ``None``."""
        step = self.step
        names = step.get("plots", []) if step is not None else []
        if not names:
            return None
        if step.get("tab", "main") == "lab":
            lab = self.dashboard.lab
            return lab.plot_area.figures[names[0]] if lab is not None else None
        return self.named_figures()[0]

    def _scroll_to_focus(self) -> None:
        fig = self.focus_figure()
        self.scroll.param.update(target=fig.id if fig is not None else "",
                                 count=self.scroll.count + 1)

    def show_clock(self, t: float, end: float | None, status: str, message: str,
                   ended: bool) -> None:
        """The run's clock in the banner: ``t`` against the step's ``end``; at the end
        "■"; a run that stopped (``status`` diverged or failed) says why."""
        if status != "running":
            text = f"⚠ **{status}**: {message}"
        elif end is None:
            text = f"t = {t:.1f}"
        else:
            text = f"{'■ ' if ended else ''}t = {t:.1f} / {end:g}"
        if self.clock.object != text:
            self.clock.object = text

    @property
    def shown(self) -> bool:
        """Whether the tour's panel is shown (a step of the tour is on)."""
        return self._panel.visible

    def __panel__(self):
        return self._panel

