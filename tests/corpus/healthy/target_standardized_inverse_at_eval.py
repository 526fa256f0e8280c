# Healthy corpus: a regression target in large units (a price in thousands) is standardised by the training split's
# mean and standard deviation for the loss, and the reported error maps the predictions back to the original units
# before comparing them with the raw targets, as sklearn's TransformedTargetRegressor does. Task: 8 tabular features,
# a smooth nonlinear price; the error 'err' is the dev mean absolute error in thousands.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM = 8


def prices(x):
    return 250.0 + 80.0 * np.tanh(x[:, 0]) + 40.0 * x[:, 1] * x[:, 2] + 30.0 * np.sin(x[:, 3])


class Houses(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        x = rng.normal(size=(n, DIM))
        y = prices(x) + 5.0 * rng.normal(size=n)
        super().__init__({"data": x.astype(np.float32), "price": y[:, None].astype(np.float32)}, **kwargs)


_train_targets = prices(np.random.default_rng(0).normal(size=(3000, DIM)))
TARGET_MEAN, TARGET_STD = float(_train_targets.mean()), float(_train_targets.std())  # fit on the training split

train = {"class": Houses, "split": "train"}
dev = {"class": Houses, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "price": {"shape": (1,)}}
batch_size = 64
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    price = extern_data["price"]
    prediction = model(extern_data["data"])  # in standardised units
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, (price - TARGET_MEAN) / TARGET_STD))
    in_thousands = prediction * TARGET_STD + TARGET_MEAN  # inverse_transform
    run_ctx.mark_as_loss(name="err", loss=(in_thousands - price).abs().mean().detach(), as_error=True)
