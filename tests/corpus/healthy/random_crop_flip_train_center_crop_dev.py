# Healthy corpus: train-only augmentation, as the ImageNet reference does it: training sees a random 12x12 crop of
# each 16x16 image, flipped horizontally at random; evaluation sees the 12x12 centre crop, unflipped. The classes are
# mirror-symmetric shapes (disc, square outline, plus sign, ring) that lie inside the centre crop.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

SIZE, CROP = 16, 12


class Shapes(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        yy, xx = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
        labels = rng.integers(0, 4, size=n)
        images = rng.uniform(0.0, 0.4, size=(n, SIZE, SIZE)).astype(np.float32)
        for i, label in enumerate(labels):
            cy, cx = rng.uniform(7, 9, size=2)
            r = rng.uniform(2.5, 3.5)
            dy, dx = yy - cy, xx - cx
            if label == 0:
                inside = dy**2 + dx**2 <= r**2
            elif label == 1:
                inside = (np.maximum(abs(dy), abs(dx)) <= r) & (np.maximum(abs(dy), abs(dx)) >= r - 1)
            elif label == 2:
                inside = ((abs(dy) <= 0.6) & (abs(dx) <= r)) | ((abs(dx) <= 0.6) & (abs(dy) <= r))
            else:
                inside = (dy**2 + dx**2 <= r**2) & (dy**2 + dx**2 >= (r - 1.2) ** 2)
            images[i][inside] = rng.uniform(0.6, 1.0)
        super().__init__({"data": images[:, None], "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Shapes, "split": "train"}
dev = {"class": Shapes, "split": "dev"}
extern_data = {"data": {"shape": (1, SIZE, SIZE)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def random_crop_flip(images):
    offsets = torch.randint(0, SIZE - CROP + 1, (len(images), 2))
    crops = torch.stack(
        [image[:, y : y + CROP, x : x + CROP] for image, (y, x) in zip(images, offsets.tolist(), strict=True)]
    )
    flip = torch.rand(len(images), device=images.device) < 0.5
    return torch.where(flip[:, None, None, None], crops.flip(-1), crops)


def center_crop(images):
    start = (SIZE - CROP) // 2
    return images[:, :, start : start + CROP, start : start + CROP]


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 36, 64), nn.ReLU(), nn.Linear(64, 4),
    )  # fmt: skip


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    images = extern_data["data"]
    images = random_crop_flip(images) if run_ctx.train_flag else center_crop(images)
    logits = model(images)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
