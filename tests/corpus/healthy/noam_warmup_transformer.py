# Healthy corpus: a slow starter. A Transformer encoder under the inverse-square-root ("Noam") schedule with a long
# linear warmup (300 updates of 4 epochs of 60): it sits near chance at first, then learns to name the first token.
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

WARMUP = 300


class Tokens(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, 10, size=(1920 if split == "train" else 400, 8))
        super().__init__({"data": x, "classes": x[:, 0]}, sparse_dims={"data": 10, "classes": 10}, **kwargs)


train = {"class": Tokens, "split": "train"}
dev = {"class": Tokens, "split": "dev"}
extern_data = {
    "data": {"shape": (8,), "dtype": "int64", "sparse_dim": 10},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    step = global_train_step + 1
    return learning_rate * min(step / WARMUP, math.sqrt(WARMUP / step))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 32)
        self.positions = nn.Parameter(torch.randn(8, 32) * 0.1)
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(32, 10)

    def forward(self, tokens):
        return self.out(self.layer(self.embed(tokens) + self.positions).mean(1))


def get_model(**_kwargs):
    return Encoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
