# Corpus bug (pytorch/pytorch#16045): the regression head's output has shape [N, 1] and the target shape [N], and
# nn.MSELoss broadcasts them to [N, N], so every prediction is pulled toward every target of the batch and the model
# learns the batch mean. Task: regress a smooth function of 8 inputs; the error is the dev mean squared error (the
# target has unit variance). Twin: ++bug False (the target is given the output's shape, [N, 1]).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Regression(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        w = np.random.default_rng(5).normal(size=(8, 2)) / np.sqrt(8)
        y = np.sin(2 * x @ w[:, 0]) + x @ w[:, 1]
        y = ((y - y.mean()) / y.std()).astype(np.float32)
        super().__init__({"data": x, "targets": y}, **kwargs)


train = {"class": Regression, "split": "train"}
dev = {"class": Regression, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "targets": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"])  # [N, 1]
    targets = extern_data["targets"]  # [N]
    loss = nn.MSELoss()(prediction, targets if bug else targets.unsqueeze(1))
    run_ctx.mark_as_loss(name="mse", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=((prediction.squeeze(1) - targets) ** 2).mean(), as_error=True)
