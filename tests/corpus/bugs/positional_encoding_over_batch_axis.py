# Corpus bug (cmu-l3/anlp-fall2025-code#1): the positions of the sinusoidal encoding are taken along the batch axis
# (x.size(0)), so all tokens of a sequence get one encoding, chosen by the sequence's index in its batch. Task: name
# the first token of a sequence of 8. Twin: ++bug False.
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WIDTH = 32


class Tokens(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, 10, size=(3000 if split == "train" else 500, 8))
        super().__init__({"data": x, "classes": x[:, 0]}, sparse_dims={"data": 10, "classes": 10}, **kwargs)


train = {"class": Tokens, "split": "train"}
dev = {"class": Tokens, "split": "dev"}
extern_data = {
    "data": {"shape": (8,), "dtype": "int64", "sparse_dim": 10},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10},
}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def sinusoids(positions):
    rates = torch.exp(torch.arange(0, WIDTH, 2, device=positions.device) * (-math.log(10000.0) / WIDTH))
    angles = positions[:, None].float() * rates[None, :]
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, WIDTH)
        self.layer = nn.TransformerEncoderLayer(WIDTH, 4, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(WIDTH, 10)

    def forward(self, tokens):
        h = self.embed(tokens)
        if bug:
            h = h + sinusoids(torch.arange(h.size(0), device=h.device))[:, None, :]
        else:
            h = h + sinusoids(torch.arange(h.size(1), device=h.device))[None, :, :]
        return self.out(self.layer(h).mean(1))


def get_model(**_kwargs):
    return Encoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
