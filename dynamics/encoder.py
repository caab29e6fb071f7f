"""A BERT encoder's forward pass in NumPy, float64 (:mod:`dynamics.bert` reads the
checkpoint it runs on).

Embeddings (word + position + token type) and layer norm; per layer self-attention with
its biases and the attention mask, output dense + layer norm (post-LN, residual),
feed-forward with the exact (erf) GELU + layer norm: the model's own arithmetic, on the
tensor names of Hugging Face's ``BertModel`` (without a leading ``bert.``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf


def layer_norm(x, weight, bias, eps):
    """``(x − mean)/√(var + eps) ⊙ weight + bias`` over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def gelu(x):
    """The exact GELU ``x Φ(x) = ½ x (1 + erf(x/√2))`` (SciPy's ``erf``: the standard
    library's ``math.erf`` differs in the last bits)."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _w(weights, name):
    return weights[name].astype(np.float64)


def forward(weights, config, ids, mask=None, type_ids=None):
    """The full forward pass of a BERT encoder, in float64.

    Parameters
    ----------
    weights : dict of str to ndarray
        The tensors, names without a leading ``bert.``.
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
    x = (weights["embeddings.word_embeddings.weight"][ids].astype(np.float64)
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


__all__ = ["encode", "forward", "gelu", "layer_norm"]
