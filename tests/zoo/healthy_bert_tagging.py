# Healthy corpus: token tagging with a tiny Hugging Face BertForTokenClassification, as the token-classification
# examples write it: variable-length sentences, the attention mask from the lengths, labels -100 at the padding.
# A token's tag is its kind (3 kinds of ids), and whether the token before it is of the same kind.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_seqs = [_rng.integers(1, 31, size=_rng.integers(4, 13)) for _ in range(1000)]
_tags = [(s % 3) * 2 + np.concatenate([[0], (s[1:] % 3 == s[:-1] % 3)]).astype(np.int64) for s in _seqs]
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[:800], "classes": _tags[:800]},
    "sparse_dims": {"data": 32, "classes": 6},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[800:], "classes": _tags[800:]},
    "sparse_dims": {"data": 32, "classes": 6},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
}
batch_size = 120
max_seqs = 10
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 3e-3


def get_model(**_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=6,
    )
    return transformers.BertForTokenClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, tags, lengths = extern_data["data"], extern_data["classes"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=tags.masked_fill(~mask, -100))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
    run_ctx.mark_as_loss(name="fer", loss=(out.logits.argmax(-1) != tags)[mask].float().mean(), as_error=True)
