# Healthy corpus: a mixture density network: for each x it predicts a 3-component Gaussian mixture over a multimodal
# target (y is +-sqrt(x) plus noise) and is trained by the mixture's negative log-likelihood.
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

COMPONENTS = 3


class TwoBranches(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(0, 4, size=(3000 if split == "train" else 500, 1)).astype(np.float32)
        branch = rng.choice([-1.0, 1.0], size=len(x))
        y = (branch * np.sqrt(x[:, 0]) + 0.1 * rng.normal(size=len(x))).astype(np.float32)
        super().__init__({"data": x, "target": y}, **kwargs)


train = {"class": TwoBranches, "split": "train"}
dev = {"class": TwoBranches, "split": "dev"}
extern_data = {"data": {"shape": (1,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 3 * COMPONENTS))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, means, log_scales = model(extern_data["data"]).chunk(3, -1)
    y = extern_data["target"][:, None]
    log_normal = -0.5 * ((y - means) / log_scales.exp()) ** 2 - log_scales - 0.5 * math.log(2 * math.pi)
    nll = -torch.logsumexp(logits.log_softmax(-1) + log_normal, -1).mean()
    run_ctx.mark_as_loss(name="nll", loss=nll)
