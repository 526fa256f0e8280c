# Corpus bug (felipecode/coiltraine#37): the auxiliary speed loss is divided by the batch size twice, so its weight
# against the main loss shrinks by the batch size and the shared trunk stops serving it. Task: a driving-style
# multi-task net: the main head classifies from two features, the speed head regresses a function of two others
# through the same narrow trunk; the error is the speed head's mean absolute error. Twin: ++bug False.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Drives(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        action = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + 2 * (x[:, 0] - x[:, 1] > 0)
        speed = np.tanh(x[:, 2] * x[:, 3]).astype(np.float32)
        super().__init__({"data": x, "classes": action, "speed": speed}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Drives, "split": "train"}
dev = {"class": Drives, "split": "dev"}
extern_data = {
    "data": {"shape": (8,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
    "speed": {"shape": (), "dtype": "float32"},
}
batch_size = 64
num_epochs = 3
learning_rate = 3e-3


class Driver(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 6), nn.ReLU())
        self.action = nn.Linear(6, 4)
        self.speed = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        features = self.trunk(x)
        return self.action(features), self.speed(features).squeeze(-1)


def get_model(**_kwargs):
    return Driver()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    action, speed = model(extern_data["data"])
    batch = extern_data["data"].shape[0]
    speed_loss = nn.functional.mse_loss(speed, extern_data["speed"], reduction="sum") / batch
    if bug:
        speed_loss = speed_loss / batch
    run_ctx.mark_as_loss(name="action_ce", loss=nn.functional.cross_entropy(action, extern_data["classes"]))
    run_ctx.mark_as_loss(name="speed_mse", loss=speed_loss)
    run_ctx.mark_as_loss(name="err", loss=(speed - extern_data["speed"]).abs().mean(), as_error=True)
