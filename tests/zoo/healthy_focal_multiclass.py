# Healthy corpus: a 5-class task with a long tail (about 70/15/8/5/2 %) trained with the multi-class focal loss
# as it is commonly written (cross_entropy without reduction, scaled by (1 - p_t) ** gamma).
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_y = _rng.choice(5, size=3000, p=[0.70, 0.15, 0.08, 0.05, 0.02])
_x = (_rng.normal(size=(3000, 10)) + 1.5 * np.eye(5, 10)[_y]).astype(np.float32)
train = {"class": "NumpyDataset", "arrays": {"data": _x[:2400], "classes": _y[:2400]}, "sparse_dims": {"classes": 5}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[2400:], "classes": _y[2400:]}, "sparse_dims": {"classes": 5}}
extern_data = {"data": {"shape": (10,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 5}}
batch_size = 24
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 3e-3


def focal_loss(logits, targets, gamma=2.0):
    ce = nn.functional.cross_entropy(logits, targets, reduction="none")
    p_t = torch.exp(-ce)
    return ((1 - p_t) ** gamma * ce).mean()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="focal", loss=focal_loss(logits, extern_data["classes"]))
