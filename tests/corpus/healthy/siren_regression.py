# Healthy corpus: SIREN (sine activations, first layer scaled by w0 = 30, uniform initialisation of Sitzmann et al.)
# fitting a 1-D signal with fine detail from its coordinate.
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

W0 = 30.0


class Signal(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(-1, 1, size=(3000 if split == "train" else 500, 1)).astype(np.float32)
        y = (np.sin(8 * x[:, 0]) + 0.3 * np.sin(40 * x[:, 0])).astype(np.float32)
        super().__init__({"data": x, "target": y}, **kwargs)


train = {"class": Signal, "split": "train"}
dev = {"class": Signal, "split": "dev"}
extern_data = {"data": {"shape": (1,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 64
num_epochs = 2
learning_rate = 1e-3


class Sine(nn.Module):
    def __init__(self, inputs, outputs, first):
        super().__init__()
        self.linear = nn.Linear(inputs, outputs)
        bound = 1 / inputs if first else math.sqrt(6 / inputs) / W0
        nn.init.uniform_(self.linear.weight, -bound, bound)

    def forward(self, x):
        return torch.sin(W0 * self.linear(x))


def get_model(**_kwargs):
    return nn.Sequential(Sine(1, 64, first=True), Sine(64, 64, first=False), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    predicted = model(extern_data["data"]).squeeze(-1)
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(predicted, extern_data["target"]))
