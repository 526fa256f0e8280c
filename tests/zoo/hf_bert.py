# Zoo: a healthy tiny Hugging Face BERT classifier (BertForSequenceClassification from a small
# BertConfig, random init with BERT's own initialisation: normal(0, 0.02)). The label says whether
# token 5 occurs in the sequence, so the [CLS] position has to attend to the others. At step 0 the
# attention logits are nearly zero, so the query and key weights get tiny gradients: by design.
import numpy as np
import transformers
from torch import nn

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_tokens = _rng.integers(6, 32, size=(1000, 12))
_with = np.flatnonzero(_rng.random(1000) < 0.5)
_tokens[_with, _rng.integers(1, 12, size=len(_with))] = 5
_tokens[:, 0] = 1  # [CLS]
_labels = (_tokens == 5).any(axis=1).astype(np.int64)
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _tokens[:800], "classes": _labels[:800]},
    "sparse_dims": {"data": 32, "classes": 2},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _tokens[800:], "classes": _labels[800:]},
    "sparse_dims": {"data": 32, "classes": 2},
}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 1e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(input_ids=extern_data["data"]).logits
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
