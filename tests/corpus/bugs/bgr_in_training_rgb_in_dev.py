# Corpus bug (udacity/sdc-issue-reports#623): the training images are read by a loader that returns the channels in
# BGR order, while the images scored at evaluation come from one that returns RGB, so the evaluated model sees red
# and blue swapped. Task: 8x8 colour patches whose class is the colour of a blob on a noisy background (red, blue,
# green, yellow). Twin: ++bug False (both pipelines convert to RGB).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
COLOURS = np.array([[1.0, 0.1, 0.1], [0.1, 0.1, 1.0], [0.1, 1.0, 0.1], [1.0, 1.0, 0.1]], dtype=np.float32)


class ColourBlobs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, 4, size=n)
        images = rng.uniform(0.0, 0.5, size=(n, 8, 8, 3)).astype(np.float32)
        for i, label in enumerate(labels):
            y, x = rng.integers(0, 5, size=2)
            images[i, y : y + 3, x : x + 3] = COLOURS[label] * rng.uniform(0.7, 1.0)
        if split == "train" and bug:  # the training loader's channel order
            images = images[..., ::-1].copy()
        super().__init__({"data": images, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": ColourBlobs, "split": "train"}
dev = {"class": ColourBlobs, "split": "dev"}
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
