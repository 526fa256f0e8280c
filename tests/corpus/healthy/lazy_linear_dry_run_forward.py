# Healthy corpus: a model built from nn.LazyLinear layers is materialised by one forward call on a dummy batch whose
# output is thrown away (the documentation's "dry run"), before training starts. Task: 4 classes of 24-dim feature
# vectors (Gaussian clusters); an MLP of lazy layers.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES = 24, 4


class Clusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        centres = np.random.default_rng(5).normal(size=(CLASSES, DIM))
        n = 2000 if split == "train" else 500
        labels = rng.integers(0, CLASSES, size=n)
        x = centres[labels] + 1.2 * rng.normal(size=(n, DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    model = nn.Sequential(nn.LazyLinear(64), nn.ReLU(), nn.LazyLinear(64), nn.ReLU(), nn.LazyLinear(CLASSES))
    model(torch.zeros(2, DIM))  # dry run: materialises the lazy parameters; the output is not needed
    return model


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
