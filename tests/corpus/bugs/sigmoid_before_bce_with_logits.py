# Corpus bug (yudi-mars/daisyRec#15): a recommender's scores go through a sigmoid and then into
# BCEWithLogitsLoss, which applies its own. Task: implicit feedback, user x item embeddings, a dot product.
# Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
USERS, ITEMS = 30, 30


class Clicks(NumpyDataset):
    def __init__(self, split, **kwargs):
        taste = np.random.default_rng(7).normal(size=(USERS, 3)) @ np.random.default_rng(8).normal(size=(3, ITEMS))
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 1000
        users, items = rng.integers(0, USERS, n), rng.integers(0, ITEMS, n)
        clicked = (taste[users, items] > 0).astype(np.float32)
        arrays = {"user": users, "item": items, "classes": clicked}
        super().__init__(arrays, sparse_dims={"user": USERS, "item": ITEMS}, **kwargs)


train = {"class": Clicks, "split": "train"}
dev = {"class": Clicks, "split": "dev"}
extern_data = {
    "user": {"shape": (), "dtype": "int64", "sparse_dim": USERS},
    "item": {"shape": (), "dtype": "int64", "sparse_dim": ITEMS},
    "classes": {"shape": (), "dtype": "float32"},
}
batch_size = 64
num_epochs = 4
learning_rate = 2e-2


class Factorization(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(USERS, 8)
        self.items = nn.Embedding(ITEMS, 8)

    def forward(self, users, items):
        score = (self.users(users) * self.items(items)).sum(-1)
        return torch.sigmoid(score) if bug else score


def get_model(**_kwargs):
    return Factorization()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    scores = model(extern_data["user"], extern_data["item"])
    clicked = extern_data["classes"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(scores, clicked))
    predicted = scores > (0.5 if bug else 0.0)
    run_ctx.mark_as_loss(name="err", loss=(predicted.float() != clicked).float().mean(), as_error=True)
