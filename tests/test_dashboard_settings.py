"""Fast tier: settings changed from every source reset the plots cleanly (issue #13).

Pasted settings (a live box, partial objects, unknown and unused keys named), presets
and their captions, and the button handlers run under the document lock.
"""

import json
import types

import pytest
from bokeh.document import Document
from dashboard_support import play
from panel.io.state import set_curdoc

from app.serving import server
from app.settings_io import parse_pasted, used_settings
from dynamics import Settings, models


def _labels(dash) -> dict:
    """Legend label of every time-series line."""
    return {k: item.label.value for k, item in dash.timeseries.legend_items.items()}


def _count_resets(dash, monkeypatch) -> list:
    calls = []
    reset = dash.sim.reset
    monkeypatch.setattr(dash.sim, "reset", lambda: calls.append(1) or reset())
    return calls


def test_pasted_model_change_restarts_once_with_fresh_plots(dash, monkeypatch):
    play(dash, 6)
    resets = _count_resets(dash, monkeypatch)
    assert dash.apply_settings_json('{"model": "transformer"}')
    assert len(resets) == 1 and dash.sim.t == 0 and dash.settings.model == "transformer"
    t = dash.timeseries.source.data["t"]
    assert list(t) == [0.0]  # no row of the old run is left
    assert _labels(dash)["d_energy"] == "Φ(t) − Φ(0)"
    assert dash.settings.n_tokens == 6 and dash.settings.dim == 3  # the rest kept
    play(dash, 3)
    assert list(dash.timeseries.source.data["t"]) == sorted(dash.timeseries.source.data["t"])


def test_a_partial_paste_changes_only_the_keys_given(dash):
    dash.settings.model = "value_matching"
    dash.settings.kappa = 2.0
    before = dash.settings.values()
    assert dash.apply_settings_json('{"beta": 2}')
    assert dash.settings.values() == dict(before, beta=2.0)
    assert dash.paste_message == "" and dash.sim.t == 0


def test_unknown_keys_refuse_the_paste_and_unused_keys_are_named(dash):
    before = dash.settings.values()
    assert not dash.apply_settings_json('{"beta": 2, "bta": 3, "gama": 1}')
    assert "'bta'" in dash.paste_message and "'gama'" in dash.paste_message
    assert dash.settings.values() == before
    # the canonical model does not use κ or ω: named, not applied; β is applied
    assert dash.apply_settings_json('{"beta": 3, "kappa": 4, "omega": 2, "dt": 0.01}')
    assert dash.settings.beta == 3.0 and dash.settings.kappa == before["kappa"]
    said = dash.paste_message
    assert "kappa" in said and "omega" in said and "Canonical" in said
    assert "dt" not in dash.paste_message  # used, and unchanged
    values, unused, problems = parse_pasted('{"model": "attention", "path": "static", '
                                            '"omega": 3}', dash.settings)
    assert problems == [] and values == {"model": "attention", "path": "static"}
    assert unused[1] == ("omega",) and "static path" in unused[0]


def test_the_settings_box_shows_the_current_settings(dash):
    box = dash.controls.paste
    assert json.loads(box.value) == used_settings(dash.settings)
    dash.controls.widgets["beta"].value = 0.5  # log10 slider: β = 10^0.5
    assert json.loads(box.value)["beta"] == pytest.approx(3.162, abs=1e-3)
    dash.settings.model = "attention"
    shown = json.loads(box.value)
    assert shown["model"] == "attention" and "path" in shown and "mass" not in shown
    assert set(shown) == {n for n, w in dash.controls.widgets.items() if w.visible}
    # the box, edited in one place and applied, changes that one setting
    before = dash.settings.values()
    box.value = box.value.replace('"gamma": 1.0', '"gamma": 2.5')
    dash.controls.apply_paste.clicks += 1
    assert dash.settings.values() == dict(before, gamma=2.5)


def test_a_preset_caption_goes_when_the_model_changes_by_hand(dash):
    preset = next(p for p in dash.presets if p["settings"]["model"] == "attention")
    assert dash.load_preset(preset)
    assert preset["name"] in dash.caption.object
    dash.settings.beta = 1.5  # exploring the preset: the caption stays
    assert preset["name"] in dash.caption.object
    dash.settings.model = "canonical"
    assert dash.caption.object == ""
    quench = next(p for p in dash.presets if "quench" in p)
    assert dash.load_preset(quench) and dash.quench is not None
    assert dash.apply_settings_json('{"model": "reduced"}')
    assert dash.caption.object == "" and dash.quench is None


@pytest.mark.parametrize("source", ["preset", "paste", "widget"])
def test_every_source_of_a_model_change_resets_legends_and_rows(dash, source):
    play(dash, 5)
    if source == "preset":
        preset = next(p for p in dash.presets if p["settings"]["model"] == "reduced")
        assert dash.load_preset(preset)
    elif source == "paste":
        assert dash.apply_settings_json('{"model": "reduced"}')
    else:
        dash.controls.widgets["model"].value = "reduced"
    assert dash.settings.model == "reduced" and dash.sim.t == 0
    assert list(dash.timeseries.source.data["t"]) == [0.0]
    symbol = models.get("reduced").energy_symbol
    assert _labels(dash)["d_energy"] == f"{symbol}(t) − {symbol}(0)"


def test_a_preset_restarts_the_run_once(dash, monkeypatch):
    resets = _count_resets(dash, monkeypatch)
    compare = next(p for p in dash.presets if p.get("compare"))
    assert dash.load_preset(compare)
    assert len(resets) == 1 and dash.reference is not None


def test_button_handlers_run_under_the_document_lock():
    """In a server session a handler is scheduled on the session's next tick (which
    holds Bokeh's document lock); without a session it runs at once."""
    calls = []
    handler = server.locked(lambda x: calls.append(x) or x)
    assert handler(1) == 1 and calls == [1]
    context = types.SimpleNamespace(session=object())

    class ServerDocument(Document):
        """A document of a server session (Bokeh's server gives it its context)."""

        session_context = property(lambda self: context)

    doc = ServerDocument()
    with set_curdoc(doc):
        assert handler(2) is None
    assert calls == [1]  # not yet: scheduled
    (callback,) = doc.session_callbacks
    callback.callback()
    assert calls == [1, 2]


def test_url_settings_restart_with_their_model():
    from app import Dashboard

    d = Dashboard(query={"model": "transformer", "n_tokens": "5"}, playing=False)
    assert d.settings.model == "transformer" and d.notice == ""
    assert _labels(d)["d_energy"] == "Φ(t) − Φ(0)"
    assert Settings().model != d.settings.model
