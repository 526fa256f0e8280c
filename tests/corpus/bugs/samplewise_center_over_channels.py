# Corpus bug (keras-team/keras#3422): per-sample centring of images takes the mean over the CHANNEL axis instead of
# over the spatial axes, so each pixel loses its own mean over channels: its brightness is erased and only the
# differences between its channels are left. Task: 8x8 colour images whose class is the quadrant with the bright
# patch (the patch is gray; each pixel gets colour noise). Twin: ++bug False (the mean over height and width, per
# channel and sample).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


def samplewise_center(images):
    axis = -1 if bug else (1, 2)
    return images - images.mean(axis=axis, keepdims=True)


class BrightQuadrant(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, 4, size=n)
        gray = rng.uniform(0.0, 0.4, size=(n, 8, 8, 1))
        for i, label in enumerate(labels):
            y, x = divmod(label, 2)
            gray[i, 4 * y : 4 * y + 4, 4 * x : 4 * x + 4] += rng.uniform(0.3, 0.6)
        images = gray + rng.normal(size=(n, 8, 8, 3)) * 0.1
        data = samplewise_center(images).astype(np.float32)
        super().__init__({"data": data, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": BrightQuadrant, "split": "train"}
dev = {"class": BrightQuadrant, "split": "dev"}
extern_data = {"data": {"shape": (8, 8, 3)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(192, 64), nn.ReLU(), nn.Linear(64, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
