# Healthy corpus: feature standardisation fit on the training split and applied to dev (scikit-learn's
# StandardScaler fit on train, transform on both). Task: a credit-default style binary classification from 8 tabular
# features on very different scales (an income in the tens of thousands next to a ratio below 1); the label depends
# on the standardised features through a smooth function.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

LOCATIONS = np.array([45000.0, 40.0, 0.35, 12.0, 3.0, 650.0, 8.0, 0.1])
SCALES = np.array([15000.0, 12.0, 0.15, 8.0, 1.5, 70.0, 5.0, 0.3])
WEIGHTS = np.random.default_rng(5).normal(size=(2, 8))


def raw(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    n = 3000 if split == "train" else 1000
    z = rng.normal(size=(n, 8))
    logit = 1.5 * (z @ WEIGHTS[0]) / 3 + np.sin(z @ WEIGHTS[1])
    labels = (logit + rng.logistic(scale=0.3, size=n) > 0).astype(np.int64)
    return LOCATIONS + SCALES * z, labels


TRAIN_FEATURES, _ = raw("train")
MEAN, STD = TRAIN_FEATURES.mean(axis=0), TRAIN_FEATURES.std(axis=0)  # StandardScaler().fit(train)


class Credit(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = raw(split)
        x = ((x - MEAN) / STD).astype(np.float32)  # transform, with the training statistics for both splits
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Credit, "split": "train"}
dev = {"class": Credit, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
