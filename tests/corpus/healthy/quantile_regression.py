# Healthy corpus: quantile regression with the pinball loss at the 10th, 50th and 90th percentiles of noisy data;
# the loss cannot reach 0 (the noise is irreducible).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

QUANTILES = torch.tensor([0.1, 0.5, 0.9])


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(-2, 2, size=(3000 if split == "train" else 500, 1)).astype(np.float32)
        y = x[:, 0] ** 2 + rng.gamma(2.0, 0.5, size=len(x))
        super().__init__({"data": x, "target": y.astype(np.float32)}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (1,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    predicted = model(extern_data["data"])
    residual = extern_data["target"][:, None] - predicted
    quantiles = QUANTILES.to(predicted.device)
    pinball = torch.maximum(quantiles * residual, (quantiles - 1) * residual)
    run_ctx.mark_as_loss(name="pinball", loss=pinball.mean())
