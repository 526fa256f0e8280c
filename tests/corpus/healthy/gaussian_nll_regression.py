# Healthy corpus: heteroscedastic regression. The network predicts a mean and a log-variance and is trained with
# GaussianNLLLoss; the noise grows with |x|, and the loss goes negative where the noise is small.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(-2, 2, size=(3000 if split == "train" else 500, 1)).astype(np.float32)
        y = np.sin(2 * x[:, 0]) + (0.02 + 0.2 * np.abs(x[:, 0])) * rng.normal(size=len(x))
        super().__init__({"data": x, "target": y.astype(np.float32)}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (1,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    mean, log_variance = model(extern_data["data"]).unbind(-1)
    loss = nn.functional.gaussian_nll_loss(mean, extern_data["target"], torch.exp(log_variance))
    run_ctx.mark_as_loss(name="nll", loss=loss)
