# Healthy corpus: an imbalanced 3-class task (about 93/5/2 %) trained with inverse-frequency class weights in
# cross_entropy, the weights a tensor on the model's device, as the imbalanced-learning tutorials write it.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_y = _rng.choice(3, size=3000, p=[0.93, 0.05, 0.02])
_x = (_rng.normal(size=(3000, 6)) + 2.0 * np.eye(3, 6)[_y]).astype(np.float32)
train = {"class": "NumpyDataset", "arrays": {"data": _x[:2400], "classes": _y[:2400]}, "sparse_dims": {"classes": 3}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[2400:], "classes": _y[2400:]}, "sparse_dims": {"classes": 3}}
extern_data = {"data": {"shape": (6,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3}}
batch_size = 24
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 3e-3
_counts = np.bincount(_y[:2400], minlength=3)
class_weights = (_counts.sum() / (3 * _counts)).tolist()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    weight = torch.tensor(class_weights, device=logits.device)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"], weight=weight))
