# Healthy corpus (on healthy_vectors.py' inputs): multi-label tagging with BCEWithLogitsLoss and a pos_weight
# per label (negatives/positives), as multi-label tutorials write it: 6 tags, each present in 10-40 % of items.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_x = _rng.normal(size=(2000, 16)).astype(np.float32)
_w = _rng.normal(size=(16, 6))
_y = ((_x @ _w) > np.quantile(_x @ _w, [0.9, 0.85, 0.8, 0.75, 0.7, 0.6], axis=0).diagonal()).astype(np.float32)
train = {"class": "NumpyDataset", "arrays": {"data": _x[:1600], "classes": _y[:1600]}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[1600:], "classes": _y[1600:]}}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (6,), "dtype": "float32"}}
batch_size = 16
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 2e-3
_pos = _y[:1600].sum(0)
pos_weight = ((1600 - _pos) / _pos).tolist()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 6))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_weight, device=logits.device))
    run_ctx.mark_as_loss(name="bce", loss=loss_fn(logits, extern_data["classes"]))
