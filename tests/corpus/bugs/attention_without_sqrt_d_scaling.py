# Corpus bug (PAIR-code/tiny-transformers#71): the attention scores are not divided by sqrt(d_head), so the softmax
# over keys saturates. Task: name the largest of 12 tokens with one wide attention head.
# Twin: ++bug False.
import math

import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WIDTH = 256


class Tokens(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, 10, size=(2000 if split == "train" else 400, 12))
        super().__init__({"data": x, "classes": x.max(axis=1)}, sparse_dims={"data": 10, "classes": 10}, **kwargs)


train = {"class": Tokens, "split": "train"}
dev = {"class": Tokens, "split": "dev"}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 10},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10},
}
batch_size = 32
num_epochs = 2
learning_rate = 1e-3


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, WIDTH)
        self.query, self.key, self.value = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, 10)

    def forward(self, tokens):
        h = self.embed(tokens)
        scores = self.query(h) @ self.key(h).transpose(1, 2)
        if not bug:
            scores = scores / math.sqrt(WIDTH)
        mixed = scores.softmax(-1) @ self.value(h)
        return self.out(mixed.mean(1))


def get_model(**_kwargs):
    return SelfAttention()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
