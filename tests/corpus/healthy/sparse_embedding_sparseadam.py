# Healthy corpus: matrix factorisation of a low-rank rating matrix with nn.Embedding(sparse=True) tables and
# torch.optim.SparseAdam (every parameter of the model is a sparse embedding table, as SparseAdam requires).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

USERS, ITEMS = 60, 50


class Ratings(NumpyDataset):
    def __init__(self, split, **kwargs):
        truth = np.random.default_rng(7).normal(size=(USERS, 2)) @ np.random.default_rng(8).normal(size=(2, ITEMS))
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 600
        users, items = rng.integers(0, USERS, n), rng.integers(0, ITEMS, n)
        rating = (truth[users, items] + 0.1 * rng.normal(size=n)).astype(np.float32)
        arrays = {"user": users, "item": items, "rating": rating}
        super().__init__(arrays, sparse_dims={"user": USERS, "item": ITEMS}, **kwargs)


train = {"class": Ratings, "split": "train"}
dev = {"class": Ratings, "split": "dev"}
extern_data = {
    "user": {"shape": (), "dtype": "int64", "sparse_dim": USERS},
    "item": {"shape": (), "dtype": "int64", "sparse_dim": ITEMS},
    "rating": {"shape": (), "dtype": "float32"},
}
batch_size = 64
num_epochs = 2
learning_rate = 2e-2
optimizer = {"class": torch.optim.SparseAdam}


class Factorization(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(USERS, 8, sparse=True)
        self.items = nn.Embedding(ITEMS, 8, sparse=True)

    def forward(self, users, items):
        return (self.users(users) * self.items(items)).sum(-1)


def get_model(**_kwargs):
    return Factorization()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    predicted = model(extern_data["user"], extern_data["item"])
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(predicted, extern_data["rating"]))
