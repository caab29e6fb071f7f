"""Fast tier: the main tab's sidebar reads essentials first (issue #27, "one story").

At first the sidebar shows at most a dozen controls (play, step, reset, replay, speed,
preset, model, β, γ); every other setting sits in exactly one titled group, collapsed,
shown only while one of its settings applies to the model. Replay runs the run again
from its initial state, a preset's quench included.
"""

import panel as pn

from app.mainview.controls import ESSENTIALS, OPEN_WITH_MODEL

#: What a control is, counted as a person would (a button, a slider, a box, a menu).
CONTROLS = (pn.widgets.Button, pn.widgets.Toggle, pn.widgets.Select, pn.widgets.IntSlider,
            pn.widgets.FloatSlider, pn.widgets.EditableFloatSlider, pn.widgets.IntInput,
            pn.widgets.TextInput, pn.widgets.TextAreaInput, pn.widgets.CheckBoxGroup,
            pn.widgets.FileInput, pn.widgets.FileDownload)


def _shown_first(dash):
    """The controls in the sidebar outside collapsed cards, visible."""
    dash.__panel__()
    out = []

    def walk(obj):
        if isinstance(obj, pn.Card) and (obj.collapsed or not obj.visible):
            return
        if getattr(obj, "visible", True) is False:
            return
        if isinstance(obj, CONTROLS):
            out.append(obj)
        for child in getattr(obj, "objects", []) or []:
            walk(child)

    walk(dash.sidebar)
    return out


def test_at_most_a_dozen_controls_at_first(dash):
    shown = _shown_first(dash)
    assert 6 <= len(shown) <= 12, [type(w).__name__ for w in shown]
    widgets = dash.controls.widgets
    for name in ESSENTIALS:
        assert widgets[name] in shown
    for name in ("n_tokens", "dim", "seed", "dt", "weights"):
        assert widgets[name] not in shown
    assert dash.controls.replay in shown and dash.controls.play in shown


def test_every_shown_setting_is_in_one_group(dash):
    dash.__panel__()
    groups = dash.controls.groups
    assert {"Tokens and initial state", "Weights and sentences", "View", "Compare runs",
            "Export, slides and settings as text"} <= set(groups)
    placed = [w for card, widgets in groups.values() for w in widgets]
    widgets = dash.controls.widgets
    rest = [w for n, w in widgets.items() if n not in ESSENTIALS]
    assert sorted(map(id, placed)) == sorted(map(id, rest))
    for card, _ in groups.values():
        assert card.collapsed
    # the extras went where they belong
    compare, _ = groups["Compare runs"]
    assert dash.controls.compare in compare.objects
    export, _ = groups["Export, slides and settings as text"]
    assert dash.controls.paste in export.objects


def test_a_model_s_own_group_appears_open_and_others_hide(dash):
    dash.__panel__()
    groups = dash.controls.groups
    path, _ = groups["Path of the scores"]
    sphere, _ = groups["Tokens on the sphere"]
    assert "Path of the scores" in OPEN_WITH_MODEL
    assert not path.visible and not sphere.visible  # canonical reads neither
    dash.settings.model = "attention"
    assert path.visible and not path.collapsed
    dash.settings.model = "sphere"
    assert sphere.visible and not sphere.collapsed and not path.visible
    noise, _ = groups["Noise"]
    assert not noise.visible  # the sphere model has no logit noise


def test_replay_starts_again_from_the_initial_state_and_plays(dash):
    dash.__panel__()
    first = dash.sim.frame()
    dash.step_once()
    dash.step_once()
    assert dash.sim.t > 0
    dash.playing = False
    dash.controls.replay.clicks += 1
    assert dash.sim.t == 0 and dash.playing
    again = dash.sim.frame()
    assert (again.attention == first.attention).all()
    assert (again.features == first.features).all()


def test_replay_undoes_a_preset_s_quench_and_arms_it_again(dash):
    dash.__panel__()
    preset = {"name": "quench", "caption": "a quench",
              "settings": {"model": "canonical", "beta": 1.0, "n_tokens": 6, "dim": 3},
              "quench": {"at_t": 0.05, "beta": 5.0}}
    assert dash.load_preset(preset)
    dash.playing = False
    while dash.sim.t < 0.1:
        dash.step_once()
    assert dash.settings.beta == 5.0  # the quench ran
    dash.replay()
    assert dash.sim.t == 0 and dash.settings.beta == 1.0 and dash.playing
    dash.playing = False
    while dash.sim.t < 0.1:
        dash.step_once()
    assert dash.settings.beta == 5.0  # and runs again
    # a setting changed by hand ends the preset: replay keeps what is set
    dash.settings.model = "reduced"
    dash.replay()
    assert dash.settings.beta == 5.0


def test_real_weights_open_their_group(dash):
    dash.__panel__()
    card, _ = dash.controls.groups["Weights and sentences"]
    assert card.collapsed
    dash.settings.weights = "minilm"
    assert not card.collapsed
