# Corpus bug (mlcommons/GaNDLF#870): the inputs and their ground truth are shuffled by two different orderings, so
# every input is paired with another example's label. Task: 4 Gaussian clusters. Twin: ++bug False (one ordering).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Clusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, 4, size=2000 if split == "train" else 500)
        centers = np.random.default_rng(5).normal(size=(4, 8))
        x = (centers[labels] + 0.6 * rng.normal(size=(len(labels), 8))).astype(np.float32)
        if split == "train":
            order = rng.permutation(len(labels))
            x, labels = x[order], labels[rng.permutation(len(labels)) if bug else order]
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
