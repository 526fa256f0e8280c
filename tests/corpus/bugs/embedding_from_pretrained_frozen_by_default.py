# Corpus bug (RUCAIBox/RecBole#2046): pretrained item embeddings are loaded with
# nn.Embedding.from_pretrained(weights), whose default freeze=True sets requires_grad=False, so the item embeddings the
# recommender was meant to fine-tune never change and the model "is not learning" (the same metrics with or without
# them). Task: click prediction for user-item pairs from a hidden factor model (a click when the true user and item
# factors agree); the pretrained item vectors are a rough, noisy estimate of the true item factors (as side-information
# embeddings are), the user embeddings start at random, and a dot product plus bias gives the click logit. The error
# is the dev click-prediction error on unseen pairs of the same users and items. Twin: ++bug False
# (from_pretrained(weights, freeze=False)).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
USERS, ITEMS, FACTORS = 200, 150, 8
_rng = np.random.default_rng(31)
USER_F = _rng.normal(size=(USERS, FACTORS))
ITEM_F = _rng.normal(size=(ITEMS, FACTORS))
PRETRAINED = (0.4 * ITEM_F + 1.0 * _rng.normal(size=(ITEMS, FACTORS))).astype(np.float32)


class Clicks(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 12000 if split == "train" else 2000
        users, items = rng.integers(0, USERS, size=n), rng.integers(0, ITEMS, size=n)
        clicks = ((USER_F[users] * ITEM_F[items]).sum(-1) > 0).astype(np.float32)
        arrays = {"user": users, "item": items, "click": clicks}
        super().__init__(arrays, sparse_dims={"user": USERS, "item": ITEMS}, **kwargs)


train = {"class": Clicks, "split": "train"}
dev = {"class": Clicks, "split": "dev"}
extern_data = {
    "user": {"shape": (), "dtype": "int64", "sparse_dim": USERS},
    "item": {"shape": (), "dtype": "int64", "sparse_dim": ITEMS},
    "click": {"shape": (), "dtype": "float32"},
}
batch_size = 64
num_epochs = 5
learning_rate = 5e-3


class DotRecommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(USERS, FACTORS)
        nn.init.normal_(self.user.weight, std=0.1)
        weights = torch.from_numpy(PRETRAINED)
        self.item = (
            nn.Embedding.from_pretrained(weights) if bug else nn.Embedding.from_pretrained(weights, freeze=False)
        )
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, users, items):
        return (self.user(users) * self.item(items)).sum(-1) + self.bias


def get_model(**_kwargs):
    return DotRecommender()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["user"], extern_data["item"])
    clicks = extern_data["click"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, clicks))
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).float() != clicks).float().mean(), as_error=True)
