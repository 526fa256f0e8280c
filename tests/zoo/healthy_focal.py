# Healthy corpus: a rare-event detector (about 4% positives, an imbalance the task has by nature) trained with
# torchvision's sigmoid_focal_loss (alpha 0.25, gamma 2; its code, torchvision is not installed here), as
# detection code trains its classification head, with the output bias initialised to the prior (RetinaNet's
# -log((1 - pi) / pi)).
import math

import numpy as np
import torch
from torch import nn


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
    p = torch.sigmoid(inputs)
    ce_loss = nn.functional.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


_rng = np.random.default_rng(0)
_x = _rng.normal(size=(4000, 12)).astype(np.float32)
_y = ((_x[:, 0] + 0.5 * _x[:, 1]) > 2.0).astype(np.int64)
train = {"class": "NumpyDataset", "arrays": {"data": _x[:3200], "classes": _y[:3200]}, "sparse_dims": {"classes": 2}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[3200:], "classes": _y[3200:]}, "sparse_dims": {"classes": 2}}
extern_data = {"data": {"shape": (12,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 3e-3


def get_model(**_kwargs):
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
    nn.init.constant_(model[2].bias, -math.log((1 - 0.01) / 0.01))
    return model


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).squeeze(-1)
    targets = extern_data["classes"].float()
    loss = sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0, reduction="mean")
    run_ctx.mark_as_loss(name="focal", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).float() != targets).float().mean(), as_error=True)
