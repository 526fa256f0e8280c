# Healthy corpus: a model that never reads one of its inputs, by design. Each example carries sensor measurements and
# a metadata vector (a one-hot of the recording site); the classifier must not use the site (it would not transfer to
# new sites), so it reads the measurements only and the "site" key is left unused.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, SITES, CLASSES = 16, 4, 3
PATTERNS = np.random.default_rng(2).normal(size=(CLASSES, DIM))


class Recordings(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2400 if split == "train" else 500
        labels = rng.integers(0, CLASSES, size=n)
        sites = rng.integers(0, SITES, size=n)
        x = PATTERNS[labels] + rng.normal(size=(n, DIM))
        site = np.eye(SITES, dtype=np.float32)[sites]
        super().__init__(
            {"data": x.astype(np.float32), "site": site, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs
        )


train = {"class": Recordings, "split": "train"}
dev = {"class": Recordings, "split": "dev"}
extern_data = {
    "data": {"shape": (DIM,)},
    "site": {"shape": (SITES,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])  # the site metadata is deliberately not an input of the model
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
