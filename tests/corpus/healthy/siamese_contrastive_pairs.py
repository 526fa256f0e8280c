# Healthy corpus: a siamese encoder trained with the margin contrastive loss on pairs labelled same / different;
# the error is a same/different decision at half the margin.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

MARGIN = 2.0


class Pairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        centers = np.random.default_rng(5).normal(size=(6, 16)).astype(np.float32)
        first = rng.integers(0, 6, n)
        same = rng.integers(0, 2, n)
        second = np.where(same == 1, first, (first + rng.integers(1, 6, n)) % 6)
        a = centers[first] + 0.5 * rng.normal(size=(n, 16)).astype(np.float32)
        b = centers[second] + 0.5 * rng.normal(size=(n, 16)).astype(np.float32)
        super().__init__({"left": a, "right": b, "same": same.astype(np.float32)}, **kwargs)


train = {"class": Pairs, "split": "train"}
dev = {"class": Pairs, "split": "dev"}
extern_data = {"left": {"shape": (16,)}, "right": {"shape": (16,)}, "same": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    distance = (model(extern_data["left"]) - model(extern_data["right"])).norm(dim=-1)
    same = extern_data["same"]
    loss = same * distance**2 + (1 - same) * nn.functional.relu(MARGIN - distance) ** 2
    run_ctx.mark_as_loss(name="contrastive", loss=loss.mean())
    decided_same = (distance < MARGIN / 2).float()
    run_ctx.mark_as_loss(name="err", loss=(decided_same != same).float().mean(), as_error=True)
