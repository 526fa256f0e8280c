# Corpus bug (open-mmlab/mmsegmentation#1209): the segmentation accuracy divides the number of correctly predicted
# pixels by target.numel(), which includes the pixels labelled with ignore_index (255, void/unlabelled, as VOC marks
# object boundaries), while those pixels can never count as correct; the reported accuracy is lower than the model's by
# the share of ignored pixels. The loss ignores them correctly. Task: 24x24 scenes of Voronoi regions of 5 classes
# (each class its own colour, plus noise) whose region boundaries are annotated 255; a small fully convolutional
# network. The error is 1 - the reported pixel accuracy on dev. Twin: ++bug False (divide by the pixels whose label
# is not ignore_index).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SIZE, CLASSES, CELLS, IGNORE_INDEX = 24, 5, 8, 255
COLOURS = np.random.default_rng(9).uniform(-1, 1, size=(CLASSES, 3)).astype(np.float32)


def scenes(rng, n):
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    labels = np.empty((n, SIZE, SIZE), dtype=np.int64)
    for i in range(n):
        seeds = rng.uniform(0, SIZE, size=(CELLS, 2))
        distance = (yy[None] - seeds[:, 0, None, None]) ** 2 + (xx[None] - seeds[:, 1, None, None]) ** 2
        cell = distance.argmin(0)
        labels[i] = rng.integers(0, CLASSES, size=CELLS)[cell]
        nearest_two = np.sort(np.sqrt(distance), 0)[:2]
        labels[i][nearest_two[1] - nearest_two[0] < 0.5] = IGNORE_INDEX  # the annotated boundary band
    images = COLOURS[np.minimum(labels, CLASSES - 1)].transpose(0, 3, 1, 2)
    images = images + 0.3 * rng.normal(size=images.shape).astype(np.float32)
    return images.astype(np.float32), labels


class Scenes(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        images, labels = scenes(rng, 1000 if split == "train" else 300)
        super().__init__({"data": images, "classes": labels}, **kwargs)


train = {"class": Scenes, "split": "train"}
dev = {"class": Scenes, "split": "dev"}
extern_data = {"data": {"shape": (3, SIZE, SIZE)}, "classes": {"shape": (SIZE, SIZE), "dtype": "int64"}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, CLASSES, 1)
    )


def accuracy(pred, target, ignore_index=IGNORE_INDEX):
    correct = (pred.argmax(1) == target).float().sum()
    if bug:
        return correct / target.numel()
    return correct / (target != ignore_index).sum().clamp(min=1)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX))
    run_ctx.mark_as_loss(name="err", loss=1 - accuracy(logits, targets), as_error=True)
