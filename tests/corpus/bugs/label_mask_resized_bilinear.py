# Corpus bug (shekkizh/FCN.tensorflow#4): the annotation masks are resized with the default bilinear interpolation,
# like the images, so class ids near the border of two regions are averaged (and rounded) into the id of another
# class that is not there. Task: 16x16 images of regions of 5 classes, each class a colour plus noise, annotated on
# a coarse 8x8 grid that the pipeline resizes to the image size; the dev error is scored per pixel against the true
# regions. Twin: ++bug False (the training masks resized with nearest-neighbour interpolation).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
CLASSES = 5
COLOURS = np.random.default_rng(3).uniform(-1, 1, size=(CLASSES, 3)).astype(np.float32) * 2


def resize_mask(coarse, mode):
    mask = torch.from_numpy(coarse).float()[:, None]
    if mode == "nearest":
        return nn.functional.interpolate(mask, scale_factor=2, mode="nearest")[:, 0].long().numpy()
    resized = nn.functional.interpolate(mask, scale_factor=2, mode="bilinear", align_corners=False)
    return resized[:, 0].round().long().numpy()


class Regions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 300
        coarse = np.zeros((n, 8, 8), dtype=np.int64)
        for i in range(n):  # a few vertical and horizontal bands of random classes
            cols = np.repeat(rng.integers(0, CLASSES, size=4), 2)
            rows = np.repeat(rng.integers(0, CLASSES, size=4), 2)
            coarse[i] = np.where(rng.random() < 0.5, cols[None, :], rows[:, None])
        truth = resize_mask(coarse, "nearest")
        images = COLOURS[truth] + rng.normal(size=truth.shape + (3,)).astype(np.float32) * 0.3
        labels = resize_mask(coarse, "bilinear") if (bug and split == "train") else truth
        super().__init__(
            {"data": images.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs
        )


train = {"class": Regions, "split": "train"}
dev = {"class": Regions, "split": "dev"}
extern_data = {
    "data": {"shape": (16, 16, 3)},
    "classes": {"shape": (16, 16), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, CLASSES, 1)
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"].permute(0, 3, 1, 2))
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(1) != targets).float().mean(), as_error=True)
