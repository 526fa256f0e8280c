# Healthy corpus: two tasks (a classification and a regression from shared features) weighted by learned
# log-variances, as in Kendall et al. 2018; the total loss goes negative as the regression's variance shrinks.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class TwoTasks(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        label = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
        value = (x[:, 2] - 0.5 * x[:, 3] + 0.05 * rng.normal(size=len(x))).astype(np.float32)
        super().__init__({"data": x, "classes": label, "value": value}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": TwoTasks, "split": "train"}
dev = {"class": TwoTasks, "split": "dev"}
extern_data = {
    "data": {"shape": (8,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
    "value": {"shape": (), "dtype": "float32"},
}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.classify = nn.Linear(32, 2)
        self.regress = nn.Linear(32, 1)
        self.log_variances = nn.Parameter(torch.zeros(2))


def get_model(**_kwargs):
    return MultiTask()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    features = model.trunk(extern_data["data"])
    logits = model.classify(features)
    ce = nn.functional.cross_entropy(logits, extern_data["classes"])
    mse = nn.functional.mse_loss(model.regress(features).squeeze(-1), extern_data["value"])
    s = model.log_variances
    run_ctx.mark_as_loss(name="weighted", loss=torch.exp(-s[0]) * ce + torch.exp(-s[1]) * mse + s.sum())
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != extern_data["classes"]).float().mean(), as_error=True)
