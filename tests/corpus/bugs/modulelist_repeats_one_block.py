# Corpus bug (zalandoresearch/pytorch-vq-vae#2): a residual stack is built as nn.ModuleList([Block(...)] * n), which
# repeats one object n times, so every layer shares one set of weights. Task: regress the output of a random teacher
# network of the intended architecture (its layers all different).
# Twin: ++bug False (a new block per layer).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
LAYERS = 6


class Teacher(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(4000 if split == "train" else 600, 8))
        weights = np.random.default_rng(9)
        h = x @ weights.normal(size=(8, 32)) / np.sqrt(8)
        for _ in range(LAYERS):
            h = h + np.maximum(h @ weights.normal(size=(32, 32)) / np.sqrt(32), 0) @ weights.normal(size=(32, 32)) / 2
        y = h @ weights.normal(size=(32, 1)) / np.sqrt(32 * LAYERS)
        super().__init__({"data": x.astype(np.float32), "targets": (y / y.std()).astype(np.float32)}, **kwargs)


train = {"class": Teacher, "split": "train"}
dev = {"class": Teacher, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "targets": {"shape": (1,)}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.block = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x):
        return x + self.block(x)


class ResidualStack(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.inp = nn.Linear(8, width)
        if bug:
            self.layers = nn.ModuleList([Residual(width)] * LAYERS)
        else:
            self.layers = nn.ModuleList([Residual(width) for _ in range(LAYERS)])
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


def get_model(**_kwargs):
    return ResidualStack()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction, targets = model(extern_data["data"]), extern_data["targets"]
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, targets))
    run_ctx.mark_as_loss(name="err", loss=nn.functional.mse_loss(prediction, targets), as_error=True)
