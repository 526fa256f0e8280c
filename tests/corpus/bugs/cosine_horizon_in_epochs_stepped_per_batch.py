# Corpus bug (ScrollPrize/villa#1495): the cosine learning-rate schedule is given the number of epochs as its horizon
# (max_steps = max_epoch) but stepped once per optimizer step, so the rate reaches zero after a handful of steps and
# rises again, decaying to zero and returning to its peak once every 2 x max_epoch steps (steps-per-epoch / 2 times
# over the run), instead of one cosine from the peak to zero over the whole run. Task: regression of a smooth
# nonlinear function of 8 inputs from noisy targets (noise std 0.5) by an MLP with SGD and momentum 0.9; the schedule
# is the diffusers-style cosine lambda, 0.5 * (1 + cos(pi * step / max_steps)), applied per step. The error is the dev
# mean squared error against the noiseless function. Twin: ++bug False (max_steps = epochs x steps per epoch).
import math

import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, NOISE, TRAIN = 8, 0.5, 2000
W = np.random.default_rng(14).normal(size=(DIM, 3))


def function(x):
    h = x @ W
    return np.sin(h[:, 0]) + 0.5 * h[:, 1] * np.tanh(h[:, 2])


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(TRAIN if split == "train" else 500, DIM))
        y = function(x) + (NOISE * rng.normal(size=len(x)) if split == "train" else 0.0)
        super().__init__({"data": x.astype(np.float32), "targets": y[:, None].astype(np.float32)}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "targets": {"shape": (1,)}}
batch_size = 16
num_epochs = 6
learning_rate = 0.01
optimizer = {"class": "sgd", "momentum": 0.9}
STEPS_PER_EPOCH = math.ceil(TRAIN / batch_size)


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    max_steps = num_epochs if bug else num_epochs * STEPS_PER_EPOCH  # _get_scheduler(max_steps=self.mgr.max_epoch)
    progress = global_train_step / max_steps
    return learning_rate * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"])
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, extern_data["targets"]))
    run_ctx.mark_as_loss(name="err", loss=nn.functional.mse_loss(prediction, extern_data["targets"]), as_error=True)
