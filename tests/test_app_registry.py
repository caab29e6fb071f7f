"""The app reads its model facts from the registry (issue #11) and carries its own theory.

The model menu, which controls apply, the equations panel, the n/a diagnostics and the
Theory page all follow ``dynamics.models``: a model registered at test time shows up
everywhere with what its spec says, and is gone once unregistered. The main tab's one
rule on models (Part I only) holds for the menu, presets, URLs and pasted JSON alike.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from dashboard_support import play
from panel.models.esm import DataEvent

from app import Dashboard, presets
from app.mainview.explain import model_text
from app.models import (
    REAL_HEAD,
    SENTENCE_SETTINGS,
    SET_BY_HEAD,
    applies,
    main_model_problem,
    main_models,
)
from app.serving import katex, urlstate
from app.teaching import theory
from dynamics import Settings, Simulation, models
from dynamics.models.attention import PATH_USES
from dynamics.paths import FeaturePath

ROOT = Path(__file__).resolve().parents[1]


def test_the_model_menu_is_the_registry_part_one(dash):
    assert list(dash.controls.widgets["model"].options) == list(models.names(part=1))
    assert main_models() == models.names(part=1)
    assert all(main_model_problem(name) is None for name in models.names(part=1))
    for name in models.names(part=2):
        assert "model must be one of" in main_model_problem(name)


@pytest.mark.parametrize("model", models.names(part=1))
def test_controls_equations_and_na_come_from_the_spec(model):
    spec = models.get(model)
    d = Dashboard(settings=Settings(model=model, n_tokens=5, dim=2), playing=False)
    for name, widget in d.controls.widgets.items():
        assert widget.visible == applies(name, d.settings)
        if name not in PATH_USES and name not in (REAL_HEAD + SET_BY_HEAD + SENTENCE_SETTINGS
                                                  + ("weights",)):
            assert widget.visible == (name in spec.reads()), name
        if name == "weights":  # (a model that runs no real head: ModelSpec.real_heads)
            assert widget.visible == (spec.real_heads != "none")
        assert widget.label == Settings.param[name].label
    text = d.explanation.pane.object
    assert spec.equations in text and spec.title in text
    assert f'href="#{spec.section}"' in text
    hidden = {k for k, line in d.timeseries.lines.items() if not line.visible}
    diagnostic = {"kl": "kl", "kl_log": "kl", "kl_bound": "kl_bound",
                  "kl_bound_log": "kl_bound", "residual": "energy_residual",
                  "dissipation_rate": "dissipation_rate", "dissipated": "dissipated"}
    # the momentum term is drawn for a model with momenta (issue #20)
    assert ("momentum" in hidden) == ("init_momentum" not in spec.settings)
    assert hidden - {"d_potential", "momentum"} == {
        k for k, v in diagnostic.items() if v in spec.not_applicable + spec.identically_zero}
    assert ("d_potential" in hidden) == (spec.energy_symbol == "Φ")  # not drawn twice
    items = d.timeseries.legend_items
    label = items["d_energy"].label.value
    assert label.startswith(f"{spec.energy_symbol}(t)")
    for key, v in diagnostic.items():
        if v in spec.identically_zero:
            assert items[key].label.value.endswith(" ≡ 0")  # (the line above the plots says why)
        elif v in spec.not_applicable:
            assert items[key].label.value.endswith("n/a for this model")


@pytest.mark.parametrize("model", models.names(part=1))
def test_identically_zero_diagnostics_vanish(model):
    """What a spec declares ≡ 0 is zero up to rounding in a run of that model."""
    spec = models.get(model)
    sim = Simulation(Settings(model=model, n_tokens=5, dim=3, init_momentum="random"))
    for _ in range(4):
        diag = sim.step(25).diagnostics
        for name in spec.identically_zero:
            assert abs(diag[name]) <= 1e-12, (name, diag[name])
        if model in ("canonical", "attention"):  # a lag and dissipation of their own
            assert diag["kl"] > 1e-6 and diag["dissipation_rate"] > 1e-6


@pytest.mark.parametrize("path", Settings.param.path.objects)
def test_path_uses_is_what_the_paths_read(path):
    """A path setting is listed for a path exactly when changing it moves X(t)."""
    rng = np.random.default_rng(1)
    X0, Y = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    base = {"omega": 1.0, "amplitude": 0.5, "switch_time": 2.0, "settle_rate": 1.0}
    times = (0.3, 1.7, 2.3, 3.1)

    def positions(values):
        fp = FeaturePath(path, X0, Y, Q, **values)
        return np.array([fp(t)[0] for t in times])

    for name in base:
        moved = not np.allclose(positions(base), positions({**base, name: base[name] * 1.3}))
        assert moved == (path in PATH_USES[name]), name


@pytest.fixture
def copy_model():
    """A Part I model registered at test time: a copy of the canonical model with its
    own title, section, equations and fewer settings."""
    spec = dataclasses.replace(
        models.get("canonical"), name="canonical_copy", title="Canonical copy",
        section="canonical_copy", settings=("gamma", "mass", "init_momentum"),
        energy_settings=("beta", "mass"), continue_settings=("dt", "gamma"),
        equations=r"<p>Copied equations $\dot X = P/m$</p>", look_for="A copy runs.")
    models.register(spec)
    yield spec
    models.unregister(spec.name)


def test_a_registered_model_appears_everywhere_and_goes_away(copy_model):
    spec = copy_model
    d = Dashboard(settings=Settings(model=spec.name, n_tokens=5, dim=2), playing=False)
    assert spec.name in d.controls.widgets["model"].options
    visible = {n for n, w in d.controls.widgets.items() if w.visible}
    # with the seed's weights, the choice of a real head does not show
    assert visible == set(spec.reads()) - {"norm_limit", *REAL_HEAD, *SENTENCE_SETTINGS}
    assert "confinement" not in visible and "gamma" in visible
    assert spec.equations in d.explanation.pane.object
    assert "A copy runs." in d.explanation.pane.object
    play(d, 2)
    assert d.sim.status == "running" and d.sim.t > 0
    # the main tab accepts it from every source
    assert presets.validate({"name": "c", "caption": "c",
                             "settings": {"model": spec.name}}) == []
    assert urlstate.parse_query({"model": spec.name}, d.query_parameters()) \
        == ({"model": spec.name}, [])
    assert d.apply_settings_json(json.dumps(dict(d.settings.values(), beta=2.0)))
    # the Theory page has its section
    page = theory.Theory()
    assert spec.section in page.anchors and spec.equations in page.html
    assert d.show_theory(spec.section) and d.theory.section == spec.section

    models.unregister(spec.name)
    try:
        e = Dashboard(playing=False)
        assert spec.name not in e.controls.widgets["model"].options
        assert spec.section not in theory.Theory().anchors
        assert "model must be one of" in main_model_problem(spec.name)
    finally:
        models.register(spec)  # the fixture unregisters it


def test_the_theory_page_has_a_section_per_model():
    page = theory.Theory()
    ids = re.findall(r'id="([^"]+)"', page.html)
    assert len(ids) == len(set(ids))  # anchors are unique
    for part in (1, 2):
        for spec in models.specs(part=part):
            assert spec.section in page.anchors, spec.name
            assert spec.title in page.html and spec.equations in page.html
            assert f'href="#{spec.section}"' in page.html  # the contents link to it
    # the general text comes first, each part before its models
    order = [page.anchors.index(a) for a in ("part-1", "scores-and-softmax", "canonical",
                                             "part-2", "linear-attention-and-blow-up",
                                             "softmax_inertial")]
    assert order == sorted(order)


def _from_the_page(links, message) -> None:
    """``message`` sent by the links' browser half (``model.send_msg``), as Bokeh's
    server hands it on: a ``DataEvent`` on the links' model in the session's document."""
    doc = Document()
    model = links.get_root(doc)
    doc.add_root(model)
    doc.callbacks.trigger_event(DataEvent(model, data=message))


def test_in_app_links_open_the_theory_tab_at_the_section(dash):
    dash.__panel__()
    assert dash.tabs.active == 0 and dash.theory is None
    _from_the_page(dash.links, {"section": "value_matching"})  # as a click on a link does
    assert dash.tabs.active == 2 and dash.theory.section == "value_matching"
    assert len(dash.tabs[2]) == 1  # the page was built when first shown
    dash.tabs.active = 0
    assert not dash.show_theory("no-such-section") and dash.tabs.active == 0
    _from_the_page(dash.links, {"section": 3})  # malformed messages are ignored
    assert dash.theory.section == "value_matching"


def test_preset_captions_link_to_their_model(dash):
    for preset in presets.load_presets():
        assert dash.load_preset(preset)
        spec = models.get(preset["settings"]["model"])
        assert f"(#{spec.section})" in dash.caption.object
        for anchor in re.findall(r"\]\(#([^)]+)\)", dash.caption.object):
            assert anchor in theory.anchors(theory.page_html()), anchor


def _text_files():
    for folder in ("app", "assets"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".json", ".md", ".css", ".html"):
                yield path


def test_no_user_facing_text_names_model_md_or_links_out():
    for path in _text_files():
        text = path.read_text(encoding="utf-8")
        assert "MODEL.md" not in text, path.relative_to(ROOT)
        if path.suffix in (".json", ".md"):
            assert "http://" not in text and "https://" not in text, path.relative_to(ROOT)
    for spec in models.specs():
        for text in (spec.equations, spec.look_for):
            assert "MODEL.md" not in text and "§" not in text, spec.name
    for name in models.names(part=1):
        assert "MODEL.md" not in model_text(name)


def test_no_model_name_is_a_literal_of_the_app():
    """Model names appear in app/ only where a default names one (see the report)."""
    allowed = {("models.py", "reduced"),  # COMPARISON_MODEL, the comparison mode's reference
               ("inertial_lab.py", "linear_accelerated"),  # the lab's default settings
               ("ensemble.py", "attention"),  # the noise tab's example run, shown at first
               ("sweep_tab.py", "attention"),  # the Sweep tab's shipped example
               ("projector.py", "sphere")}  # the sphere's two plots' size on a projector
    found = set()
    for path in (ROOT / "app").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in models.names():
            if re.search(rf"[\"']{name}[\"']", text):
                found.add((path.name, name))
    assert found <= allowed, found - allowed


def test_katex_stylesheet_and_fonts():
    css, faces = katex.STYLESHEET, katex.FONT_FACES
    assert "App-KaTeX_Main" in css and "@font-face" not in css
    assert "span.katex-html { display: inline; }" in css
    fonts = sorted(p.name for p in (ROOT / "assets/katex/fonts").glob("*.woff2"))
    assert faces.count("@font-face") == len(fonts) >= 11
    assert "font-family: App-KaTeX_Size2; font-style: normal; font-weight: 400" in faces
    assert "font-family: App-KaTeX_Main; font-style: italic; font-weight: 700" in faces
    katex.install_fonts()
    katex.install_fonts()
    assert pn.config.global_css.count(faces) == 1


def test_a_real_head_sets_n_and_d_and_shows_its_choice():
    """With a real head's weights the sentence, layer, head and heads controls show and
    N and d (set by the sentence) hide; with the seed's weights the other way round."""
    d = Dashboard(settings=Settings(model="canonical", n_tokens=5, dim=2), playing=False)
    w = d.controls.widgets
    assert w["n_tokens"].visible and w["dim"].visible
    assert not any(w[k].visible for k in REAL_HEAD)
    d.settings.weights = "minilm"
    assert all(w[k].visible for k in REAL_HEAD)
    assert not w["n_tokens"].visible and not w["dim"].visible


@pytest.mark.slow  # (three runs of a real head, one with all 12 heads: ~6 s)
def test_real_head_controls_follow_what_the_model_runs():
    """``ModelSpec.real_heads``: a layer's heads are offered by the canonical model only,
    real heads by every Part I model but the sphere's; switching to a model that cannot
    run the current choice puts it back (seed weights, one head) instead of failing."""
    d = Dashboard(settings=Settings(model="canonical", weights="minilm", heads="all"),
                  playing=False)
    w = d.controls.widgets
    assert w["weights"].visible and w["heads"].visible and d.sim.frame().heads.shape[0] == 12
    d.settings.model = "reduced"
    assert w["weights"].visible and w["head"].visible and not w["heads"].visible
    assert d.settings.heads == "one" and d.settings.weights == "minilm"
    assert d.sim.status == "running" and d.sim.frame().tokens[0] == "[CLS]"
    d.settings.model = "sphere"
    assert not any(w[k].visible for k in ("weights", *REAL_HEAD))
    assert d.settings.weights == "seed" and d.sim.settings.model == "sphere"
    d.advance_frame()
    assert d.sim.status == "running" and d.sim.frame().tokens == ()
