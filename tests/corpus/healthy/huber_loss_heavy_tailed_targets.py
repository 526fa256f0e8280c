# Healthy corpus: robust regression with the Huber loss (smooth L1, delta 1): the training targets carry Student-t
# noise (2 degrees of freedom, a few huge outliers), whose gradients the Huber loss caps, so for most outliers the
# gradient has a constant magnitude whatever their size. Dev targets are noise-free; 'err' is their mean absolute
# error.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM = 6
WEIGHTS = np.random.default_rng(31).normal(size=DIM)


def truth(x):
    return np.sin(x @ WEIGHTS) + 0.5 * x[:, 0] * x[:, 1]


class Regression(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 5000 if split == "train" else 1000
        x = rng.normal(size=(n, DIM))
        y = truth(x) + (0.3 * rng.standard_t(2, size=n) if split == "train" else 0.0)
        super().__init__({"data": x.astype(np.float32), "target": y.astype(np.float32)}, **kwargs)


train = {"class": Regression, "split": "train"}
dev = {"class": Regression, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 64
num_epochs = 5
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"]).squeeze(-1)
    target = extern_data["target"]
    run_ctx.mark_as_loss(name="huber", loss=nn.functional.huber_loss(prediction, target, delta=1.0))
    run_ctx.mark_as_loss(name="err", loss=(prediction - target).abs().mean(), as_error=True)
