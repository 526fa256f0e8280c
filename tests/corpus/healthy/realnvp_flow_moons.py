# Healthy corpus: a RealNVP normalising flow (4 affine couplings, alternating halves) on two moons, trained by the
# exact negative log-likelihood; the loss goes negative as the density sharpens.
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Moons(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        angle = rng.uniform(0, math.pi, n)
        upper = rng.integers(0, 2, n)
        x = np.stack([np.cos(angle) + (1 - upper) * 1.0, np.sin(angle) * (2 * upper - 1) + (1 - upper) * 0.5], 1)
        x = x + 0.05 * rng.normal(size=x.shape)
        super().__init__({"data": x.astype(np.float32)}, **kwargs)


train = {"class": Moons, "split": "train"}
dev = {"class": Moons, "split": "dev"}
extern_data = {"data": {"shape": (2,)}}
batch_size = 64
num_epochs = 2
learning_rate = 2e-3


class Coupling(nn.Module):
    def __init__(self, flip):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        keep, change = (x[:, 1:], x[:, :1]) if self.flip else (x[:, :1], x[:, 1:])
        log_scale, shift = self.net(keep).chunk(2, -1)
        log_scale = torch.tanh(log_scale)
        changed = change * log_scale.exp() + shift
        out = torch.cat([changed, keep], 1) if self.flip else torch.cat([keep, changed], 1)
        return out, log_scale.sum(-1)


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.couplings = nn.ModuleList([Coupling(flip=i % 2 == 1) for i in range(4)])

    def log_prob(self, x):
        log_det = torch.zeros(x.shape[0], device=x.device)
        for coupling in self.couplings:
            x, step = coupling(x)
            log_det = log_det + step
        base = -0.5 * (x**2).sum(-1) - math.log(2 * math.pi)
        return base + log_det


def get_model(**_kwargs):
    return Flow()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    run_ctx.mark_as_loss(name="nll", loss=-model.log_prob(extern_data["data"]).mean())
