# Corpus bug (tanjimin/C.Origami#42): the PositionalEncoding of the PyTorch transformer tutorial expects
# (seq_len, batch, dim) and adds pe[:x.size(0)], but it is given batch-major (batch, seq_len, dim) input, so example i of
# a batch gets position i's encoding on every one of its tokens: positions inside a sequence are never encoded, and an
# example's representation depends on where it sits in the batch. Task: sequences of 12 tokens over 10 symbols whose
# class is the symbol at the first position; embedding scaled by sqrt(d), the tutorial's sinusoidal PositionalEncoding,
# nn.TransformerEncoder (batch_first=True), mean pooling, a linear classifier. Twin: ++bug False (the encoding indexed
# by the sequence axis).
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
LENGTH, SYMBOLS, D_MODEL = 12, 10, 32


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, SYMBOLS, size=(3000 if split == "train" else 500, LENGTH))
        super().__init__({"data": x, "classes": x[:, 0]}, sparse_dims={"data": SYMBOLS, "classes": SYMBOLS}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": SYMBOLS},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": SYMBOLS},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class PositionalEncoding(nn.Module):
    """The tutorial's module: x is expected as [seq_len, batch_size, embedding_dim]."""

    def __init__(self, d_model, dropout=0.0, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        if bug:  # x is [batch, seq_len, dim] here
            x = x + self.pe[: x.size(0)]
        else:
            x = x + self.pe[: x.size(1)].transpose(0, 1)
        return self.dropout(x)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(SYMBOLS, D_MODEL)
        self.pos_encoder = PositionalEncoding(D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, 4, 64, dropout=0.0, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, 2)
        self.out = nn.Linear(D_MODEL, SYMBOLS)

    def forward(self, tokens):
        x = self.pos_encoder(self.embedding(tokens) * math.sqrt(D_MODEL))
        return self.out(self.transformer_encoder(x).mean(1))


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
