# Healthy corpus: the dev set is a harder, shifted domain with the same label set: its images carry much stronger
# additive noise than the training images (a corruption benchmark's "gaussian noise" severity), so the dev error sits
# above the training error by design. Task: 12x12 grey images of a bar in one of 4 orientations; a small CNN.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

SIZE, CLASSES = 12, 4


def bars(rng, n, noise):
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] - (SIZE - 1) / 2
    labels = rng.integers(0, CLASSES, size=n)
    angles = labels * np.pi / CLASSES + rng.normal(scale=0.1, size=n)
    shift = rng.uniform(-2, 2, size=(n, 1, 1))
    dist = np.abs(np.cos(angles)[:, None, None] * yy - np.sin(angles)[:, None, None] * xx - shift)
    images = np.exp(-(dist**2)) + noise * rng.normal(size=(n, SIZE, SIZE))
    return images.astype(np.float32), labels


class Bars(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        if split == "train":
            images, labels = bars(rng, 3000, noise=0.3)
        else:  # the shifted domain: the same bars under strong noise
            images, labels = bars(rng, 600, noise=0.6)
        super().__init__({"data": images, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Bars, "split": "train"}
dev = {"class": Bars, "split": "dev"}
extern_data = {"data": {"shape": (SIZE, SIZE)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 3
learning_rate = 2e-3


class BarNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()
        )
        self.out = nn.Linear(32, CLASSES)

    def forward(self, images):
        x = images[:, None]
        return self.out(self.conv(x).mean(dim=(-2, -1)))


def get_model(**_kwargs):
    return BarNet()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
