"""The choice of a real head (Theory page: "A real head on a real sentence", "Several
heads"), kept to what exists: whether a checkpoint is installed and which it is, the
layers and heads of the shipped file or of the checkpoint, :func:`fit_real_head` (a choice
that does not exist is changed to one that does, saying why) and the shipped sentences
chosen by their text (:func:`sentence_select`).
"""

from __future__ import annotations

import panel as pn

from dynamics import Settings, bert
from dynamics import heads as shipped_heads

#: What the page says where no checkpoint is installed (your own sentence is then off).
ENABLE_HINT = ("**Your own sentence** on every layer and head: install all-MiniLM-L6-v2 "
               f"where the app runs, `{bert.INSTALL_HINT}` (or set "
               f"`{bert.CHECKPOINT_ENV}` to a BERT-style folder), and restart the app.")
#: The settings that choose a real head (a change of one may need the sliders refitted).
CHOICE = ("weights", "checkpoint", "sentence", "layer", "head", "heads", "text")


def checkpoint_installed(settings) -> bool:
    """Whether the checkpoint folder the settings name (``checkpoint``, else the
    environment variable, else an installed MiniLM: :func:`dynamics.bert.find_checkpoint`)
    has its three files (nothing is read: a page without your own sentence loads no
    model)."""
    folder = bert.find_checkpoint(settings.checkpoint or None)
    return folder is not None and all((folder / n).is_file() for n in bert.FILES)


def find_checkpoint(settings) -> bert.Checkpoint | None:
    """The checkpoint the settings name, read (once per server process:
    :func:`dynamics.bert.open_checkpoint`), or None where there is none or it cannot be
    used."""
    try:
        return bert.open_checkpoint(settings.checkpoint or None)
    except ValueError:
        return None


def choices(weights: str, checkpoint) -> tuple[tuple, int]:
    """``(layers, number of heads)`` of the shipped file or of ``checkpoint``."""
    if weights == "checkpoint" and checkpoint is not None:
        return tuple(range(checkpoint.n_layers)), checkpoint.n_heads
    return shipped_heads.layers(), int(shipped_heads.load()["query_weight"].shape[1])


def _span(values) -> str:
    values = list(values)
    return (f"{values[0]} to {values[-1]}" if values == list(range(values[0], values[-1] + 1))
            else ", ".join(map(str, values)))


def fit_real_head(settings, apply: bool = True) -> list[str]:
    """Change the settings to a real head that exists, saying why (one line per change):
    ``weights="checkpoint"`` without a checkpoint falls back to the shipped heads, a layer
    or head out of range to the nearest that exists, a shipped sentence out of range to
    the first, a sentence the checkpoint refuses (empty, too long) to the example one.
    Nothing is computed but the word pieces. Returns the messages (empty: nothing to
    change); with ``apply=False`` only the messages (what does not exist), nothing changed.
    """
    if settings.weights == "seed":
        return []
    fixes, why = {}, []

    def fix(name, value, problem, instead):
        fixes[name] = value
        why.append(f"{problem}; {instead}" if apply else problem)

    weights, checkpoint = settings.weights, None
    if weights == "checkpoint":
        try:
            checkpoint = bert.open_checkpoint(settings.checkpoint or None)
        except ValueError as err:  # (none installed: the message says how to install one)
            fix("weights", "minilm", f"weights = checkpoint: {err}",
                "the shipped sentences are shown instead")
            weights = "minilm"
    layers, n_heads = choices(weights, checkpoint)
    if settings.layer not in layers:
        nearest = min(layers, key=lambda v: (abs(v - settings.layer), v))
        fix("layer", nearest, f"layer {settings.layer} does not exist (layers {_span(layers)})",
            f"layer {nearest} is shown")
    if settings.head >= n_heads:
        fix("head", n_heads - 1, f"head {settings.head} does not exist (heads 0 to "
            f"{n_heads - 1})", f"head {n_heads - 1} is shown")
    n_sentences = len(shipped_heads.sentences())
    if weights == "minilm" and settings.sentence >= n_sentences:
        fix("sentence", 0, f"sentence {settings.sentence} does not exist (sentences 0 to "
            f"{n_sentences - 1})", "the first is shown")
    if weights == "checkpoint":
        try:
            checkpoint.tokenize(settings.text)
        except ValueError as err:
            fix("text", Settings.param.text.default, str(err), "the example sentence is shown")
    if fixes and apply:
        settings.param.update(**fixes)
    return why


def sentence_select(settings) -> pn.widgets.Select:
    """The shipped sentence, chosen by its text (both ways with ``settings.sentence``)."""
    texts = shipped_heads.sentences()
    select = pn.widgets.Select(
        label=Settings.param.sentence.label,
        options={text: i for i, text in enumerate(texts)},
        value=settings.sentence if settings.sentence < len(texts) else 0,
        description=Settings.param.sentence.doc, sizing_mode="stretch_width")
    select.param.watch(lambda event: setattr(settings, "sentence", event.new), "value")

    def to_select(event):
        if event.new in select.options.values():
            select.value = event.new

    settings.param.watch(to_select, "sentence")
    return select
