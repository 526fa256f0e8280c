# Corpus bug (JDAI-CV/fast-reid#363): the training images are downscaled by PIL, which low-pass filters (antialiases)
# when it shrinks an image, and the test images by cv2.resize with the same nominal (bilinear) interpolation, which
# does not, so the evaluated model sees aliased images: the fine texture of the originals folds into coarse patterns.
# Task: 32x32 grey images, each a smooth pattern that names its class (one of 4 oriented gradients and blobs) on a
# fine striped texture of random orientation and period plus pixel noise, downscaled to 8x8 for a small CNN. Twin:
# ++bug False (both splits downscaled with antialiasing).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SIZE, SMALL = 32, 8


def pattern(label, yy, xx, rng):
    shift = rng.uniform(-0.2, 0.2, size=2)
    if label == 0:
        return xx + shift[0]
    if label == 1:
        return yy + shift[1]
    if label == 2:
        return (xx + yy) / 2 + shift[0]
    return np.exp(-((xx - shift[0]) ** 2 + (yy - shift[1]) ** 2) * 3) - 0.5


def make(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    n = 3000 if split == "train" else 600
    yy, xx = np.meshgrid(np.linspace(-1, 1, SIZE), np.linspace(-1, 1, SIZE), indexing="ij")
    labels = rng.integers(0, 4, size=n)
    images = np.empty((n, SIZE, SIZE), dtype=np.float32)
    for i, label in enumerate(labels):
        angle, period, phase = rng.uniform(0, np.pi), rng.uniform(2.2, 3.5), rng.uniform(0, 2 * np.pi)
        u = (np.cos(angle) * xx + np.sin(angle) * yy) * (SIZE / 2)
        texture = np.sin(2 * np.pi * u / period + phase)
        images[i] = 0.25 * pattern(label, yy, xx, rng) + 0.6 * texture + rng.normal(scale=0.2, size=(SIZE, SIZE))
    return images, labels


def downscale(images, antialias):
    batch = torch.from_numpy(images)[:, None]
    small = nn.functional.interpolate(batch, size=(SMALL, SMALL), mode="bilinear", antialias=antialias)
    return small[:, 0].numpy()


class Textured(NumpyDataset):
    def __init__(self, split, **kwargs):
        images, labels = make(split)
        antialias = split == "train" or not bug  # PIL for training; cv2.resize (no antialiasing) for testing
        small = downscale(images, antialias=antialias)
        super().__init__({"data": small[:, None], "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Textured, "split": "train"}
dev = {"class": Textured, "split": "dev"}
extern_data = {"data": {"shape": (1, SMALL, SMALL)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 16, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
