# Healthy corpus: symmetric label noise by design (a noisy-label robustness setup). A fifth of the training labels
# are replaced by a uniformly random class; the dev labels are clean. Train error stays near the noise level while the
# dev error is low: the MLP (with weight decay and few epochs) does not memorise the flipped labels.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, NOISE = 20, 5, 0.2
CENTRES = np.random.default_rng(4).normal(size=(CLASSES, DIM)) * 1.2


class Clusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, CLASSES, size=n)
        x = CENTRES[labels] + rng.normal(size=(n, DIM))
        if split == "train":  # the noisy annotation, by design
            flipped = rng.random(n) < NOISE
            labels = np.where(flipped, rng.integers(0, CLASSES, size=n), labels)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 3
learning_rate = 1e-3
optimizer = {"class": "adamw", "weight_decay": 1e-2}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
