# Healthy corpus: CutMix. In training, a random box of each image is replaced by the same box of another image of
# the batch (one box per batch, its area ratio drawn from Beta(1, 1)), and the loss is the cross-entropy against both
# labels, weighted by the share of the image each one covers, as the CutMix reference trains. Evaluation sees clean
# images and hard labels.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

SIZE = 16


class Textures(NumpyDataset):
    """Stripes of one of 4 orientations with a random period and phase, and noise."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        yy, xx = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
        labels = rng.integers(0, 4, size=n)
        images = np.empty((n, 1, SIZE, SIZE), dtype=np.float32)
        for i, label in enumerate(labels):
            angle = label * np.pi / 4 + rng.normal(scale=0.1)
            u = np.cos(angle) * xx + np.sin(angle) * yy
            images[i, 0] = np.sin(2 * np.pi * u / rng.uniform(3, 6) + rng.uniform(0, 6)) + rng.normal(
                scale=0.5, size=(SIZE, SIZE)
            )
        super().__init__({"data": images, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Textures, "split": "train"}
dev = {"class": Textures, "split": "dev"}
extern_data = {"data": {"shape": (1, SIZE, SIZE)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4),
    )  # fmt: skip


def cutmix(images, targets):
    lam = float(np.random.beta(1.0, 1.0))
    perm = torch.randperm(len(images), device=images.device)
    cut = int(SIZE * np.sqrt(1 - lam))
    cy, cx = np.random.randint(SIZE), np.random.randint(SIZE)
    y0, y1 = max(cy - cut // 2, 0), min(cy + cut // 2, SIZE)
    x0, x1 = max(cx - cut // 2, 0), min(cx + cut // 2, SIZE)
    mixed = images.clone()
    mixed[:, :, y0:y1, x0:x1] = images[perm, :, y0:y1, x0:x1]
    lam = 1 - (y1 - y0) * (x1 - x0) / (SIZE * SIZE)  # the share the original image keeps
    return mixed, targets[perm], lam


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    images, targets = extern_data["data"], extern_data["classes"]
    if run_ctx.train_flag:
        images, other, lam = cutmix(images, targets)
        logits = model(images)
        ce = lam * nn.functional.cross_entropy(logits, targets) + (1 - lam) * nn.functional.cross_entropy(logits, other)
        run_ctx.mark_as_loss(name="ce", loss=ce)
    else:
        logits = model(images)
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
