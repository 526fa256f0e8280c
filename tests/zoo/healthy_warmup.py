# Healthy corpus: a slow starter: a small Transformer encoder (pre-norm, as the attention tutorials write it)
# with a linear warmup over 3000 steps (BERT's schedule, per step through dynamic_learning_rate), 400-step epochs.
# For its first 200 steps the rate is tiny and the loss sits at its chance level; it reaches 0 dev errors by the
# end of the first epoch. Label: whether token 5 occurs.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_tokens = _rng.integers(6, 32, size=(7200, 12))
_with = np.flatnonzero(_rng.random(7200) < 0.5)
_tokens[_with, _rng.integers(1, 12, size=len(_with))] = 5
_labels = (_tokens == 5).any(axis=1).astype(np.int64)
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _tokens[:6400], "classes": _labels[:6400]},
    "sparse_dims": {"data": 32, "classes": 2},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _tokens[6400:], "classes": _labels[6400:]},
    "sparse_dims": {"data": 32, "classes": 2},
}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 2e-3
warmup_steps = 3000


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    return learning_rate * min(1.0, (global_train_step + 1) / warmup_steps)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 32)
        self.pos = nn.Parameter(0.02 * torch.randn(12, 32))
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.out = nn.Linear(32, 2)

    def forward(self, tokens):
        return self.out(self.encoder(self.embed(tokens) + self.pos).mean(1))


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
