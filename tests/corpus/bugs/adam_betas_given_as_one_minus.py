# Corpus bug (mila-iqia/blocks#1159): betas written in the "1 - beta" convention of one library are given to an Adam
# that takes beta itself, so the moment averages forget almost at once (beta1 0.1, beta2 0.001: sign-like, noisy
# updates). Task: a noisy regression. Twin: ++bug False (betas 0.9, 0.999).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        weights = np.random.default_rng(4).normal(size=8)
        y = (x @ weights + 0.5 * rng.normal(size=len(x))).astype(np.float32)
        super().__init__({"data": x, "target": y}, **kwargs)


class BetaAdam:
    """Adam with the config's betas, read when the optimizer is built (after ++bug is applied)."""

    def __new__(cls, params, **kwargs):
        import torch

        return torch.optim.Adam(params, betas=(0.1, 0.001) if bug else (0.9, 0.999), **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 16
num_epochs = 2
learning_rate = 1e-2
optimizer = {"class": BetaAdam}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    predicted = model(extern_data["data"]).squeeze(-1)
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(predicted, extern_data["target"]))
    run_ctx.mark_as_loss(name="err", loss=(predicted - extern_data["target"]).abs().mean(), as_error=True)
