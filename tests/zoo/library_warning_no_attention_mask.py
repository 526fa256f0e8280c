# A tiny Hugging Face BERT classifier on padded batches, called without attention_mask: transformers warns once
# ("We strongly recommend passing in an `attention_mask` since your input_ids may be padded"), the one line
# that names this bug. Label: whether token 5 occurs.
import numpy as np
import transformers
from torch import nn

_rng = np.random.default_rng(0)
_seqs = [_rng.integers(6, 32, size=_rng.integers(3, 10)) for _ in range(200)]
for _s in _seqs[::2]:
    _s[_rng.integers(0, len(_s))] = 5
_labels = np.array([int((s == 5).any()) for s in _seqs])
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs, "classes": _labels},
    "sparse_dims": {"data": 32, "classes": 2},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 100
max_seqs = 10
num_epochs = 1
optimizer = {"class": "adamw"}
learning_rate = 1e-3


def get_model(**_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
        pad_token_id=0,
    )
    return transformers.BertForSequenceClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(input_ids=extern_data["data"]).logits
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
