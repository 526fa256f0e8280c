# Corpus bug (ikhlestov/vision_networks#27): each split is standardised with its own mean and standard deviation, so
# dev (here mostly of one class, as a small or skewed test set is) is shifted against what the model learned.
# Twin: ++bug False (dev standardised with the training statistics).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


def images(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    n = 2000 if split == "train" else 500
    labels = rng.integers(0, 4, size=n) if split == "train" else rng.choice(4, size=n, p=[0.7, 0.1, 0.1, 0.1])
    centers = np.random.default_rng(5).normal(size=(4, 8)) * 1.5
    return 3.0 + centers[labels] + 0.8 * rng.normal(size=(n, 8)), labels


class Channels(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = images(split)
        stats = x if bug else images("train")[0]
        x = (x - stats.mean(0)) / stats.std(0)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Channels, "split": "train", "seq_ordering": "random"}
dev = {"class": Channels, "split": "dev"}
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
