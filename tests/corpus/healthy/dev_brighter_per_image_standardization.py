# Healthy corpus: the dev images were recorded brighter and with more contrast than the training images (a gain and
# an offset per image), and the model standardises each image by its own mean and standard deviation first, as
# tf.image.per_image_standardization does, so the difference is intended and harmless. Task: 12x12 grey images of a
# bar in one of 4 orientations on a noisy background; a small CNN.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

SIZE, CLASSES = 12, 4


def bars(rng, n, gain, offset):
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] - (SIZE - 1) / 2
    labels = rng.integers(0, CLASSES, size=n)
    angles = labels * np.pi / CLASSES + rng.normal(scale=0.1, size=n)
    shift = rng.uniform(-2, 2, size=(n, 1, 1))
    dist = np.abs(np.cos(angles)[:, None, None] * yy - np.sin(angles)[:, None, None] * xx - shift)
    images = np.exp(-(dist**2)) + 0.3 * rng.normal(size=(n, SIZE, SIZE))
    g = gain * rng.uniform(0.8, 1.2, size=(n, 1, 1))
    return (g * images + offset).astype(np.float32), labels


class Bars(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        if split == "train":
            images, labels = bars(rng, 3000, gain=0.4, offset=0.2)
        else:  # the dev camera: brighter, more contrast
            images, labels = bars(rng, 600, gain=1.6, offset=0.9)
        super().__init__({"data": images, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Bars, "split": "train"}
dev = {"class": Bars, "split": "dev"}
extern_data = {"data": {"shape": (SIZE, SIZE)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 3
learning_rate = 2e-3


def per_image_standardization(images):
    mean = images.mean(dim=(-2, -1), keepdim=True)
    std = images.std(dim=(-2, -1), keepdim=True)
    adjusted_std = torch.maximum(std, torch.tensor(1.0 / SIZE, device=images.device))
    return (images - mean) / adjusted_std


class BarNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()
        )
        self.out = nn.Linear(32, CLASSES)

    def forward(self, images):
        x = per_image_standardization(images)[:, None]
        return self.out(self.conv(x).mean(dim=(-2, -1)))


def get_model(**_kwargs):
    return BarNet()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
