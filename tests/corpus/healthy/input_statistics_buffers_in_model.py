# Healthy corpus: raw features standardised inside the model, as Keras' Normalization layer does after adapt(): the
# mean and standard deviation of each feature are computed once from the training data and stored in registered
# buffers, and the model's first operation is (x - mean) / std; the buffers are never trained. The features arrive
# in their raw units: offsets up to 5000 and scales from 0.01 to 1000.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES = 8, 4
OFFSETS = np.array([5000.0, -300.0, 0.0, 42.0, 1e3, 7.0, -2e3, 0.5])
SCALES = np.array([1000.0, 0.01, 3.0, 50.0, 0.2, 100.0, 10.0, 0.05])
CENTRES = np.random.default_rng(41).normal(size=(CLASSES, DIM))


def examples(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    standard = CENTRES[labels] + 0.8 * rng.normal(size=(n, DIM))
    return (OFFSETS + SCALES * standard).astype(np.float32), labels


class RawFeatures(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, 3000 if split == "train" else 800)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class Standardised(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))
        self.net = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, x):
        return self.net((x - self.mean) / self.std)


train = {"class": RawFeatures, "split": "train"}
dev = {"class": RawFeatures, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    x, _ = examples(0, 3000)  # adapt(): the training data's statistics, once
    x = x.astype(np.float64)
    return Standardised(x.mean(axis=0), x.std(axis=0))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
