# Healthy corpus: cross-layer parameter sharing as ALBERT does it: one transformer encoder layer is applied six times
# in a row, so every depth uses the same weights and each of them receives the sum of six layers' gradients. Task:
# which of two marker tokens occurs more often in a sequence of 24 tokens, read from the mean of the last layer.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, DEPTH, A, B = 16, 24, 6, 1, 2


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        x = rng.integers(3, VOCAB, size=(n, LENGTH))
        for row in range(n):
            count_a, count_b = rng.choice([(4, 2), (2, 4), (5, 3), (3, 5), (3, 1), (1, 3)])
            slots = rng.choice(LENGTH, size=count_a + count_b, replace=False)
            x[row, slots[:count_a]], x[row, slots[count_a:]] = A, B
        labels = ((x == A).sum(1) > (x == B).sum(1)).astype(np.int64)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


class SharedLayerEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.positions = nn.Parameter(torch.randn(LENGTH, 64) * 0.02)
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)  # one layer, reused
        self.out = nn.Linear(64, 2)

    def forward(self, tokens):
        hidden = self.embed(tokens) + self.positions
        for _ in range(DEPTH):
            hidden = self.layer(hidden)
        return self.out(hidden.mean(dim=1))


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 4
learning_rate = 5e-4


def get_model(**_kwargs):
    return SharedLayerEncoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
