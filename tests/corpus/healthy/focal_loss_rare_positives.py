# Healthy corpus: the sigmoid focal loss (Lin et al. 2017, gamma 2, alpha 0.25, as torchvision's sigmoid_focal_loss)
# on a detection-like binary task with 5% positives: easy examples are down-weighted, so the loss is far below the
# binary cross-entropy's and most examples contribute almost nothing. The scores are not calibrated at 0.5 (alpha and
# gamma push them down), so 'err' is threshold-free, as detectors are ranked: 1 - ROC AUC within a batch.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, GAMMA, ALPHA = 16, 2.0, 0.25
DIRECTION = np.random.default_rng(131).normal(size=DIM)


class Anchors(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 6000 if split == "train" else 2000
        labels = (rng.random(n) < 0.05).astype(np.int64)
        x = rng.normal(size=(n, DIM)) + 4.0 * labels[:, None] * DIRECTION / np.linalg.norm(DIRECTION)
        x = np.tanh(x)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


def sigmoid_focal_loss(logits, targets):
    p = torch.sigmoid(logits)
    ce = nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    alpha_t = ALPHA * targets + (1 - ALPHA) * (1 - targets)
    return (alpha_t * (1 - p_t) ** GAMMA * ce).mean()


train = {"class": Anchors, "split": "train"}
dev = {"class": Anchors, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 128
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).squeeze(-1)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="focal", loss=sigmoid_focal_loss(logits, targets.float()))
    positive, negative = logits[targets == 1], logits[targets == 0]
    if len(positive) and len(negative):  # 1 - ROC AUC: the fraction of positive/negative pairs ranked wrongly
        run_ctx.mark_as_loss(name="err", loss=(positive[:, None] <= negative[None, :]).float().mean(), as_error=True)
