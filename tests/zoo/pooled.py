# Zoo base: a healthy sequence classifier (fixed-length [6, 4] feature sequences, a time-major GRU,
# attention pooling over time, batch norm in training mode, which mixes sequences by design).
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_x = _rng.normal(size=(1200, 6, 4)).astype(np.float32)
_y = (_x[:, :, 0].mean(axis=1) > 0).astype(np.int64) + 2 * (_x[:, :, 1].mean(axis=1) > 0)
train = {"class": "NumpyDataset", "arrays": {"data": _x[:1000], "classes": _y[:1000]}, "sparse_dims": {"classes": 4}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[1000:], "classes": _y[1000:]}, "sparse_dims": {"classes": 4}}
extern_data = {"data": {"shape": (6, 4)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2


class Pooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 16)  # time-major: [T, B, F]
        self.score = nn.Linear(16, 1)
        self.norm = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 4)

    def encode(self, x):
        return self.rnn(x.transpose(0, 1))[0].transpose(0, 1)

    def attention(self, scores):
        return torch.softmax(scores, dim=1)

    def forward(self, x):
        h = self.encode(x)  # [B, T, 16]
        weights = self.attention(self.score(h))  # [B, T, 1]
        return self.out(self.norm((weights * h).sum(dim=1)))


def get_model(*, epoch, step, **_kwargs):
    return Pooler()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
