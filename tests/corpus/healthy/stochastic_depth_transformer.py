# Healthy corpus: a Transformer encoder whose residual blocks are each skipped with probability 0.2 per batch during
# training (stochastic depth, scaled by 1/(1-p) when kept), on naming the largest of 12 tokens.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DROP = 0.2


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
learning_rate = 2e-3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        if self.training and torch.rand(()) < DROP:
            return x
        h = self.norm(x)
        update = self.attn(h, h, h, need_weights=False)[0]
        return x + (update / (1 - DROP) if self.training else update)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 32)
        self.blocks = nn.Sequential(*[Block() for _ in range(3)])
        self.out = nn.Linear(32, 10)

    def forward(self, tokens):
        return self.out(self.blocks(self.embed(tokens)).max(1).values)


def get_model(**_kwargs):
    return Encoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
