# Healthy corpus: evaluation with an exponential moving average of the weights (timm's ModelEmaV2): the model keeps an
# EMA copy of its network (decay 0.99) that a callback updates after every optimizer step, and in evaluation mode the
# forward pass uses the EMA copy, so the dev scores come from other weights than the ones the training loss moved.
# Task: 8-class classification of noisy features by an MLP with SGD and momentum.
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, DECAY = 16, 8, 0.99
CENTRES = np.random.default_rng(65).normal(size=(CLASSES, DIM))


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        x = np.tanh(CENTRES[labels] + 0.9 * rng.normal(size=(len(labels), DIM)))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class WithEma(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, CLASSES))
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    @torch.no_grad()
    def update_ema(self):
        for e, p in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            e.mul_(DECAY).add_(p, alpha=1 - DECAY)

    def forward(self, x):
        return self.net(x) if self.training else self.ema(x)


def update_ema(state):
    state.model.update_ema()


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 0.05
optimizer = {"class": "sgd", "momentum": 0.9}
callbacks = {"after_optimizer_step": update_ema}


def get_model(**_kwargs):
    return WithEma()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
