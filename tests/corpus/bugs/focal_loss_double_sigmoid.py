# Corpus bug (itakurah/focal-loss-pytorch#5): a binary focal loss applies a sigmoid to its input and then calls
# binary_cross_entropy_with_logits, which applies another. Task: rare positives (10 %) from 8 features.
# Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Rare(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 1000, 8)).astype(np.float32)
        y = (x[:, 0] + 0.5 * x[:, 1] > 1.3).astype(np.float32)
        super().__init__({"data": x, "classes": y}, **kwargs)


train = {"class": Rare, "split": "train"}
dev = {"class": Rare, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def focal_loss(inputs, targets, gamma=2.0):
    if bug:
        inputs = torch.sigmoid(inputs)
    ce = nn.functional.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = torch.exp(-ce)
    return ((1 - p_t) ** gamma * ce).mean()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).squeeze(-1)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="focal", loss=focal_loss(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).float() != targets).float().mean(), as_error=True)
