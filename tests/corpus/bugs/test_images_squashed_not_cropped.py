# Corpus bug (KaiyangZhou/CoOp#26): the test transform resizes every image to a fixed square, distorting its aspect
# ratio, while training fed square crops that keep it (the intended test transform resizes the shorter side and takes
# the centre crop). Task: 12x16 (height x width) grey images of one of 4 shapes (disc, square, wide rectangle, tall
# rectangle) of random size near the centre, on a noisy background; training sees a random 12x12 crop of each image,
# evaluation the whole image squashed to 12x12. Twin: ++bug False (evaluation takes the 12x12 centre crop).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
HEIGHT, WIDTH = 12, 16


def make(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    n = 3000 if split == "train" else 600
    yy, xx = np.meshgrid(np.arange(HEIGHT) + 0.5, np.arange(WIDTH) + 0.5, indexing="ij")
    labels = rng.integers(0, 4, size=n)
    images = rng.uniform(0.0, 0.3, size=(n, HEIGHT, WIDTH)).astype(np.float32)
    for i, label in enumerate(labels):
        cy, cx = rng.uniform(5.5, 6.5), rng.uniform(7.5, 8.5)
        size = rng.uniform(2.0, 3.0)
        half_h, half_w = {0: (size, size), 1: (size, size), 2: (size / 1.5, size), 3: (size, size / 1.5)}[label]
        if label == 0:
            inside = ((yy - cy) / half_h) ** 2 + ((xx - cx) / half_w) ** 2 <= 1
        else:
            inside = (abs(yy - cy) <= half_h) & (abs(xx - cx) <= half_w)
        images[i][inside] = rng.uniform(0.7, 1.0)
    return images, labels


class Shapes(NumpyDataset):
    def __init__(self, split, **kwargs):
        images, labels = make(split)
        if split == "train":  # a random square crop of each image: the aspect ratio is kept
            offsets = np.random.default_rng(2).integers(0, WIDTH - HEIGHT + 1, size=len(images))
            images = np.stack([image[:, o : o + HEIGHT] for image, o in zip(images, offsets, strict=True)])
        elif bug:  # the test transform: resize to a fixed square
            squashed = nn.functional.interpolate(
                torch.from_numpy(images)[:, None], size=(HEIGHT, HEIGHT), mode="bilinear", antialias=True
            )
            images = squashed[:, 0].numpy()
        else:  # resize the shorter side (already 12), centre crop
            start = (WIDTH - HEIGHT) // 2
            images = images[:, :, start : start + HEIGHT]
        super().__init__({"data": images[:, None].copy(), "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Shapes, "split": "train"}
dev = {"class": Shapes, "split": "dev"}
extern_data = {"data": {"shape": (1, HEIGHT, HEIGHT)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 36, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
