"""The page to take home around a run's plots (:mod:`app.teaching.standalone`): the title,
the settings line, the model's equations typeset by KaTeX, links to the other pages of a
tour, and every byte inline (Bokeh's scripts, KaTeX's script and stylesheet, the fonts as
data URIs), so the file opens from disk with no request to any network.

:func:`run_html` is the page of a run; :func:`export_html` the command line's
``python -m app export-html OUT --settings QUERY`` (the query of the page's own URL,
parsed as the page parses it, :mod:`app.serving.urlstate`); :func:`write_trajectory` is
what ``dynamics.Trajectory.to_html`` finds through the entry point
``attention_dynamics.exporters`` (``pyproject.toml``). Errors are
:class:`UnknownSetting`, :class:`RefusedSettings` and :class:`UnwritableOutput`; a file is
written atomically or not at all.
"""

from __future__ import annotations

import html
import math
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import panel as pn
from bokeh.embed import file_html
from bokeh.resources import INLINE

from app import presets as presets_module
from app.mainview.head_choice import fit_real_head
from app.models import main_model_problem, spec
from app.serving import katex, urlstate
from app.settings_io import VIEW_PARAMS
from dynamics import Settings, Simulation
from dynamics.trajectory import write_atomically

from .run_record import settings_line
from .standalone import PageRun, page_layout, player_html
from .tour_slides import run_frames

#: Time a run is taken to when neither ``--t-end`` nor a preset says.
DEFAULT_T_END = 15.0


class ExportError(ValueError):
    """A page that cannot be written (the message says why)."""


class UnknownSetting(ExportError):
    """A query names a setting the app does not have."""


class RefusedSettings(ExportError):
    """A value or combination of settings the app refuses."""


class UnwritableOutput(ExportError):
    """The file or folder to write cannot be written."""


def _katex_script() -> str:
    """KaTeX's script and its auto-render extension, as Panel ships them ("" if not)."""
    try:
        from panel.models.katex import KATEX_VERSION
    except ImportError:
        return ""
    dist = Path(pn.__file__).parent / "dist" / "bundled" / "katex" / f"katex@{KATEX_VERSION}" \
        / "dist"
    parts = [dist / "katex.min.js", dist / "contrib" / "auto-render.min.js"]
    if not all(p.is_file() for p in parts):
        return ""
    return "\n".join(p.read_text(encoding="utf-8") for p in parts)


#: Arrow keys ← → go to the previous / next page, unless a widget (the slider) has them.
ARROW_KEYS = """
document.addEventListener("keydown", (e) => {
  if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
  if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
  for (const el of e.composedPath()) {
    if (!(el instanceof Element)) continue;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName)) return;
    if (el.getAttribute("role") === "slider" || el.classList.contains("noUi-handle")) return;
  }
  const link = document.querySelector(e.key === "ArrowRight" ? "a[rel=next]" : "a[rel=prev]");
  if (link) window.location.href = link.getAttribute("href");
});
"""
RENDER_MATH = """
if (window.renderMathInElement) {
  for (const el of document.querySelectorAll(".equations")) {
    renderMathInElement(el, {delimiters: [{left: "$$", right: "$$", display: true},
                                          {left: "$", right: "$", display: false}],
                             throwOnError: false});
  }
}
"""
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 16px 24px;
       color: #222; }
header { border-left: 4px solid #2a6fdb; background: #f3f7ff; padding: 4px 12px;
         margin: 10px 0; }
header h1 { font-size: 1.3em; margin: 6px 0; }
header p { margin: 4px 0; max-width: 75em; }
nav { margin: 8px 0; display: flex; gap: 1.5em; }
nav a { text-decoration: none; color: #2a6fdb; font-weight: 600; }
.settings { font-family: monospace; font-size: 0.9em; color: #333; }
.equations { max-width: 75em; margin: 6px 0 10px; }
.status { color: #d7301f; }
.note { color: #333; }
.player { display: flex; align-items: center; gap: 12px; margin: 6px 0; }
.player button { font-size: 1em; padding: 5px 14px; background: #2a6fdb; color: white;
                 border: 0; border-radius: 4px; min-width: 7em; cursor: pointer; }
.player label { flex: 1; display: flex; align-items: center; gap: 8px; }
.player input { flex: 1; }
.readout { font-family: monospace; margin: 2px 0 6px; }
"""
TEMPLATE = """
{% block postamble %}<style>{{ style }}
{{ katex_css }}
{{ font_faces }}</style>
<script>{{ katex_js }}</script>{% endblock %}
{% block contents %}
{{ nav }}
<header><h1>{{ heading | e }}</h1>
{% if caption %}<p>{{ caption | e }}</p>{% endif %}
<p class="settings">{{ settings | e }}</p>
{% if status %}<p class="status">{{ status | e }}</p>{% endif %}
{% if note %}<p class="note">{{ note | e }}</p>{% endif %}</header>
{% if equations %}<section class="equations">{{ equations }}</section>{% endif %}
{{ player }}
{{ super() }}
<script>{{ render_math }}
{{ arrow_keys }}</script>
{% endblock %}
"""


def nav_html(back: str | None = None, index: str | None = None, forward: str | None = None,
             where: str = "") -> str:
    """Links Back / Index / Next of a tour's page (``rel=prev``/``next``: the arrow keys)."""
    links = []
    if back:
        links.append(f'<a rel="prev" href="{html.escape(back)}">◀ Back</a>')
    if index:
        links.append(f'<a href="{html.escape(index)}">Index</a>')
    if forward:
        links.append(f'<a rel="next" href="{html.escape(forward)}">Next ▶</a>')
    if where:
        links.append(f"<span>{html.escape(where)}</span>")
    return f"<nav>{' '.join(links)}</nav>" if links else ""


def _drop_python_callbacks(layout) -> None:
    """Forget the Python callbacks the dashboard's plots carry (a reset of the axes
    refitting them): a page without a server runs JavaScript callbacks only."""
    for model in layout.references():
        for name in ("_callbacks", "_event_callbacks"):
            if getattr(model, name, None):
                setattr(model, name, {})


def page_html(layout, title: str, caption: str = "", settings: str = "",
              equations: str = "", status: str = "", nav: str = "", player: str = "",
              note: str = "") -> str:
    """The whole page around the Bokeh ``layout``, every resource inline (``status``: why
    a run stopped, in red; ``note``: a line of results)."""
    _drop_python_callbacks(layout)
    return strip_linked(file_html(layout, INLINE, title, template=TEMPLATE, template_variables={
        "style": STYLE, "katex_css": katex.STYLESHEET, "font_faces": katex.FONT_FACES,
        "katex_js": _katex_script(), "heading": title, "caption": caption,
        "settings": settings, "equations": equations, "status": status, "nav": nav,
        "render_math": RENDER_MATH, "arrow_keys": ARROW_KEYS, "player": player,
        "note": note}))


#: A script or stylesheet the page would load from a file or the network.
LINKED = re.compile(r'<script\b[^>]*\bsrc="(?!data:)[^"]*"[^>]*>\s*</script>\s*'
                    r'|<link\b[^>]*\bhref="(?!data:)[^"]*"[^>]*>\s*')


def strip_linked(page: str) -> str:
    """``page`` without the scripts and stylesheets it links rather than holds: Panel adds
    its extensions' files (``static/extensions/panel/…``, e.g. KaTeX, which the page holds
    inline) to every Bokeh document once it is imported; a file opened from disk has
    none of them."""
    return LINKED.sub("", page)


def run_html(run: PageRun, title: str = "", caption: str = "", nav: str = "",
             annotations=()) -> str:
    """The page of ``run``: its plots, slider and Play, the settings and the equations."""
    model = run.settings["model"]
    lam = run.settings.get("gamma", math.nan) / run.settings.get("beta", math.nan)
    layout = page_layout(run, annotations, lam)
    t_end = float(run.times[-1])
    title = title or f"{spec(model).title}, t = 0 to {t_end:g}"
    return page_html(layout, title, caption, settings_line(run.settings),
                     spec(model).equations, run.message, nav, player_html(run))


# -- the command line ----------------------------------------------------------
def parse_settings(query: str) -> Settings:
    """The settings of a page's URL query (``model=canonical&beta=2``; a leading ``?`` or
    a whole URL also), parsed as the page parses its URL (:func:`urlstate.parse_value`).

    Raises
    ------
    UnknownSetting
        A key that is no setting (the page's view parameters, e.g. ``projector``, are
        accepted and ignored).
    RefusedSettings
        A value out of range or of the wrong type, a model the main tab does not run, a
        real head that does not exist, a key given twice.
    """
    text = query.strip()
    if "://" in text or text.startswith("/"):
        text = urlsplit(text).query
    text = text.removeprefix("?")
    try:
        pairs = parse_qs(text, keep_blank_values=True, strict_parsing=bool(text))
    except ValueError as err:
        raise RefusedSettings(f"the query is not a URL query ({err}): {text[:60]!r}") from None
    names = set(Settings.names()) - set(urlstate.NOT_IN_URL)
    unknown = [k for k in pairs if k not in names and k not in VIEW_PARAMS]
    if unknown:
        raise UnknownSetting(f"unknown setting(s) {', '.join(map(repr, unknown))} in the "
                             "query (the settings are those of python -m dynamics run --help)")
    values, problems = {}, []
    for key, given in pairs.items():
        if key in VIEW_PARAMS:
            continue
        if len(given) > 1:
            problems.append(f"{key} given {len(given)} times")
            continue
        try:
            values[key] = urlstate.parse_value(Settings.param[key], given[0])
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise RefusedSettings("; ".join(problems))
    try:
        settings = Settings(**values)
    except ValueError as err:
        raise RefusedSettings(str(err)) from None
    problems = fit_real_head(settings, apply=False)
    problem = main_model_problem(settings.model)
    if problem or problems:
        raise RefusedSettings("; ".join([*([problem] if problem else []), *problems]))
    return settings


def preset_end(settings: Settings) -> float:
    """``t_end`` of the preset whose settings these are (its ``"t_end"``), else
    :data:`DEFAULT_T_END`."""
    values = settings.values()
    for preset in presets_module.load_presets():
        if isinstance(preset, dict) and "settings" in preset and not \
                presets_module.validate(preset):
            if presets_module.preset_values(preset) == values and "t_end" in preset:
                return float(preset["t_end"])
    return DEFAULT_T_END


def check_writable(path) -> Path:
    """``path`` as a Path, if its folder exists and may be written (else
    :class:`UnwritableOutput`)."""
    path = Path(path)
    folder = path.resolve().parent
    if path.is_dir():
        raise UnwritableOutput(f"{path} is a folder, not a file to write")
    if not folder.is_dir():
        raise UnwritableOutput(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UnwritableOutput(f"cannot write {path}: the folder {folder} is not writable")
    return path


def write_page(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (no partial file), or raise
    :class:`UnwritableOutput`."""
    path = check_writable(path)
    try:
        write_atomically(path, text.encode("utf-8"))
    except OSError as err:
        raise UnwritableOutput(f"cannot write {path}: {err.strerror or err}") from None
    return path


def settings_run(settings: Settings, t_end: float, quench=None) -> PageRun:
    """Run ``settings`` headless to ``t_end`` (a preset's ``quench`` applied on the way)."""
    if not (isinstance(t_end, int | float) and math.isfinite(t_end) and 0 < t_end <= 1e3):
        raise RefusedSettings(f"t_end must be a time in (0, 1000], got {t_end!r}")
    try:
        frames, sim = run_frames(settings, float(t_end), quench=quench)
    except ValueError as err:  # a combination the engine refuses
        raise RefusedSettings(str(err)) from None
    message = sim.message if sim.status != "running" else ""
    return PageRun.from_frames(sim.settings, frames, sim.changes, message)


def export_html(out, query: str, t_end: float | None = None) -> Path:
    """``python -m app export-html``: the page of the run of ``query`` written to ``out``."""
    check_writable(out)
    settings = parse_settings(query)
    t_end = preset_end(settings) if t_end is None else t_end
    return write_page(out, run_html(settings_run(settings, t_end)))


# -- Trajectory.to_html ----------------------------------------------------------
def replay(traj) -> PageRun:
    """The page of a ``dynamics.Trajectory``: its own times, attention, features and
    diagnostics; ``A*`` and the words from its settings run again to the same steps.

    Raises
    ------
    ExportError
        The trajectory is not the run of its settings (your own arrays, a setting changed
        mid-run, steps chosen by ``rtol``): then ``A*`` cannot be recomputed.
    """
    settings = Settings(**traj.settings)
    problem = main_model_problem(settings.model)
    if problem:  # the page draws the main tab's plots
        raise ExportError(f"the page shows runs of the main tab: {problem}")
    steps = np.rint(np.asarray(traj.times) / settings.dt).astype(int)
    if not np.allclose(steps * settings.dt, traj.times, rtol=0, atol=1e-9 * (1 + traj.times[-1])):
        raise ExportError("the trajectory's times are not steps of its dt (a run with rtol): "
                          "its page cannot be drawn; run it with a fixed dt")
    sim, frames, done = Simulation(settings), [], 0
    for n in steps:
        sim.advance(int(n) - done)
        done = int(n)
        frames.append(sim.frame())
    scale = 1.0 + float(np.abs(traj.features).max())
    again = np.stack([f.features for f in frames])
    if again.shape != traj.features.shape or float(np.abs(again - traj.features).max()) > \
            1e-6 * scale:
        raise ExportError("the trajectory is not the run of its settings (your own arrays, "
                          "or a setting changed mid-run): its page cannot be drawn")
    has_diag = "hamiltonian" in traj.diagnostics
    frames = [type(f)(t=float(traj.times[i]), features=traj.features[i],
                      momenta=traj.momenta[i],
                      attention=(traj.attention[i] if traj.attention is not None
                                 else f.attention), softmax=f.softmax,
                      diagnostics=({k: float(v[i]) for k, v in traj.diagnostics.items()}
                                   if has_diag else f.diagnostics), tokens=f.tokens)
              for i, f in enumerate(frames)]
    return PageRun.from_frames(settings, frames, message=traj.message)


def write_trajectory(traj, path, title: str = "", caption: str = "") -> Path:
    """Write the page of ``traj`` (a ``dynamics.Trajectory``) to ``path`` (atomically).

    Registered as the ``html`` exporter of the entry-point group
    ``attention_dynamics.exporters``: ``Trajectory.to_html(path)`` calls it.
    """
    check_writable(path)
    return write_page(path, run_html(replay(traj), title, caption))
