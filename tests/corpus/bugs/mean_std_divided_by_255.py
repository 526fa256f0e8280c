# Corpus bug (batuhan3526/ResNet50_on_Cifar_100_Without_Transfer_Learning#1): the images are already scaled to
# [0, 1] (as by ToTensor), and the normalisation's mean and std, given in that scale, are divided by 255 again, so
# the inputs reaching the network are about 255 times too large and far from zero mean. Task: which quadrant of a
# noisy 3x8x8 colour image holds a brighter patch, through a small CNN. Twin: ++bug False (the statistics are used in
# the data's [0, 1] scale).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
MEAN, STD = (0.507, 0.487, 0.441), (0.267, 0.256, 0.276)  # per channel, in the [0, 1] scale


class Patches(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        labels = rng.integers(0, 4, size=n)
        pixels = np.array(MEAN)[None, :, None, None] * 255 + 60 * rng.normal(size=(n, 3, 8, 8))
        for i, quadrant in enumerate(labels):
            row, col = divmod(quadrant, 2)
            pixels[i, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4] += 40
        images = np.clip(pixels, 0, 255).astype(np.uint8) / 255.0  # ToTensor: [0, 1]
        if bug:
            mean, std = [m / 255.0 for m in MEAN], [s / 255.0 for s in STD]
        else:
            mean, std = MEAN, STD
        x = (images - np.array(mean)[None, :, None, None]) / np.array(std)[None, :, None, None]
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Patches, "split": "train"}
dev = {"class": Patches, "split": "dev"}
extern_data = {"data": {"shape": (3, 8, 8)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 16, 4),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
