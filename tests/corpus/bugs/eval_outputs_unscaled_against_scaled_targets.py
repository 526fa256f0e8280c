# Corpus bug (chemprop/chemprop#822): targets are standardised for training and the model's output transform undoes
# the standardisation whenever the model is in evaluation mode; validation then compares those unscaled predictions
# with the standardised targets, so the validation error measures the scale gap, not the model.
# Twin: ++bug False (validation compares in the standardised scale, the transform is used for inference only).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
MEAN, STD = 40.0, 6.0  # of the raw targets, measured on the training split


class Properties(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 10)).astype(np.float32)
        raw = (
            MEAN + STD * np.tanh(x[:, :3].sum(1, keepdims=True) - x[:, 3:4] * x[:, 4:5]) + rng.normal(size=(len(x), 1))
        )
        super().__init__({"data": x, "targets": ((raw - MEAN) / STD).astype(np.float32)}, **kwargs)


train = {"class": Properties, "split": "train"}
dev = {"class": Properties, "split": "dev"}
extern_data = {"data": {"shape": (10,)}, "targets": {"shape": (1,)}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        y = self.net(x)
        if bug and not self.training:  # the output transform: predictions in the targets' original units
            y = y * STD + MEAN
        return y

    @torch.no_grad()
    def predict(self, x):
        return self.net(x) * STD + MEAN


def get_model(**_kwargs):
    return Regressor()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction, targets = model(extern_data["data"]), extern_data["targets"]
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, targets))
    run_ctx.mark_as_loss(name="err", loss=(prediction - targets).abs().mean(), as_error=True)
