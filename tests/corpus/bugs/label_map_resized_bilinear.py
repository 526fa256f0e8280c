# Corpus bug (divamgupta/image-segmentation-keras#11): the label maps are resized like the images, with cv2.resize's
# default linear interpolation, so at every boundary between two regions the interpolated class ids (rounded back to
# integers) become the ids of other classes that are not there (between class 1 and class 3 a band of class 2), and
# the model is trained on those labels. Task: 40x40 scenes of Voronoi regions of 5 classes (each class with its own
# colour, plus noise) resized to 24x24 for the network; a small fully convolutional network predicts the class of
# every pixel. The error is the dev pixel error against the dev annotations resized by nearest neighbour (the classes
# the scene holds there). Twin: ++bug False (training label maps resized by nearest neighbour).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
FULL, SIZE, CLASSES, CELLS = 40, 24, 5, 8
COLOURS = np.random.default_rng(9).uniform(-1, 1, size=(CLASSES, 3)).astype(np.float32)


def scenes(rng, n):
    yy, xx = np.mgrid[0:FULL, 0:FULL]
    labels = np.empty((n, FULL, FULL), dtype=np.int64)
    for i in range(n):
        seeds = rng.uniform(0, FULL, size=(CELLS, 2))
        cell = ((yy[None] - seeds[:, 0, None, None]) ** 2 + (xx[None] - seeds[:, 1, None, None]) ** 2).argmin(0)
        labels[i] = rng.integers(0, CLASSES, size=CELLS)[cell]
    images = COLOURS[labels].transpose(0, 3, 1, 2) + 0.3 * rng.normal(size=(n, 3, FULL, FULL)).astype(np.float32)
    return images, labels


def resize(array, mode):
    out = nn.functional.interpolate(torch.from_numpy(array).float(), size=(SIZE, SIZE), mode=mode)
    return out.numpy()


class Scenes(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        images, labels = scenes(rng, 1200 if split == "train" else 300)
        images = resize(images.astype(np.float32), "bilinear")
        if split == "train" and bug:  # getSegmentationArr: cv2.resize(seg, (width, height)) with INTER_LINEAR
            labels = np.rint(resize(labels[:, None].astype(np.float32), "bilinear")[:, 0]).astype(np.int64)
        else:
            labels = resize(labels[:, None].astype(np.float32), "nearest")[:, 0].astype(np.int64)
        super().__init__(
            {"data": images.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs
        )


train = {"class": Scenes, "split": "train"}
dev = {"class": Scenes, "split": "dev"}
extern_data = {
    "data": {"shape": (3, SIZE, SIZE)},
    "classes": {"shape": (SIZE, SIZE), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, CLASSES, 1)
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(1) != targets).float().mean(), as_error=True)
