"""A tiny BERT-style checkpoint written by the tests (2 layers, 4 heads, d = 16): a
WordPiece tokenizer built in code with ``tokenizers``, random weights written with
``safetensors``, ``config.json``. Nothing is downloaded."""

import json

import numpy as np

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", ".", "a",
         "dog", "ran", "run", "##s", "big", "it", "was", "tired", "because", ",", "!",
         "my", "own", "sentence", "##ly", "slow", "quick"]
CONFIG = {"hidden_size": 16, "num_attention_heads": 4, "num_hidden_layers": 2,
          "intermediate_size": 24, "layer_norm_eps": 1e-12, "vocab_size": len(VOCAB),
          "max_position_embeddings": 40, "type_vocab_size": 2}
def write_checkpoint(folder, seed=1, prefix="bert.", config=CONFIG):
    """A random BERT-style checkpoint of Hugging Face's layout; returns its tensors."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    d, f, V = config["hidden_size"], config["intermediate_size"], len(VOCAB)
    P = config["max_position_embeddings"]

    def r(*shape, scale=0.6):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(V, d),
         "embeddings.position_embeddings.weight": r(P, d),
         "embeddings.token_type_embeddings.weight": r(2, d),
         "embeddings.LayerNorm.weight": 1 + r(d, scale=0.1),
         "embeddings.LayerNorm.bias": r(d, scale=0.1)}
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        for name, shape in (("attention.self.query", (d, d)), ("attention.self.key", (d, d)),
                            ("attention.self.value", (d, d)),
                            ("attention.output.dense", (d, d)),
                            ("intermediate.dense", (f, d)), ("output.dense", (d, f))):
            w[p + name + ".weight"] = r(*shape)
            w[p + name + ".bias"] = r(shape[0], scale=0.3)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = 1 + r(d, scale=0.1)
            w[p + ln + ".bias"] = r(d, scale=0.1)
    save_file({prefix + k: v for k, v in w.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.enable_padding(length=20)  # (a padded tokenizer file, as MiniLM's: switched off)
    tok.save(str(folder / "tokenizer.json"))
    return w
