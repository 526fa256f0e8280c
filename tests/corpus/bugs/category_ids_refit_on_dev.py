# Corpus bug (sayakpaul/Benchmarking-and-MLI-experiments-on-the-Adult-dataset#1): categorical features are encoded
# with an encoder fitted on each split on its own; dev lacks some categories, so a category's id in dev is another
# category's id in train. Task: a label decided by three categorical columns. Twin: ++bug False (train's encoding).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
CATEGORIES = 8
_effects = np.random.default_rng(7).normal(size=(3, CATEGORIES))


def _encode(raw, fitted_on):
    """A label encoder: the sorted categories present in ``fitted_on`` get ids 0, 1, ..."""
    return np.stack([np.searchsorted(np.unique(fitted_on[:, c]), raw[:, c]) for c in range(raw.shape[1])], 1)


class Records(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        # the raw categories; dev never holds category 0 or 3 of any column
        low = 0 if split == "train" else 1
        raw = rng.integers(low, CATEGORIES, size=(3000 if split == "train" else 600, 3))
        if split != "train":
            raw[raw == 3] = 4
        score = sum(_effects[c][raw[:, c]] for c in range(3))
        labels = (score > np.median(score)).astype(np.int64)
        train_raw = np.random.default_rng(0).integers(0, CATEGORIES, size=(3000, 3))
        ids = _encode(raw, raw if (bug and split != "train") else train_raw)
        super().__init__(
            {"data": ids.astype(np.int64), "classes": labels}, sparse_dims={"data": CATEGORIES, "classes": 2}, **kwargs
        )


train = {"class": Records, "split": "train"}
dev = {"class": Records, "split": "dev"}
extern_data = {
    "data": {"shape": (3,), "dtype": "int64", "sparse_dim": CATEGORIES},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Tabular(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.ModuleList(nn.Embedding(CATEGORIES, 8) for _ in range(3))
        self.head = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, ids):
        return self.head(torch.cat([e(ids[:, c]) for c, e in enumerate(self.embed)], 1))


def get_model(**_kwargs):
    return Tabular()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
