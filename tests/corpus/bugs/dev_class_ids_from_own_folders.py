# Corpus bug (weecology/DeepForest#1147): the crop classifier's train and validation sets are each an ImageFolder,
# which numbers the class folders it finds in sorted order; the validation set has no crops of one species, so
# every species after it gets an index one lower than in training and its validation labels name another species.
# Task: 6 tree species, each crop a 12x12x3 patch of a crown whose colour and texture depend on the species; the
# validation crops have no 'elm'. Twin: ++bug False (one class-to-index mapping, from the union of both splits'
# folders, for both).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SPECIES = ["birch", "cedar", "elm", "fir", "maple", "oak"]
COLOURS = np.array(
    [[0.6, 0.8, 0.3], [0.2, 0.5, 0.3], [0.4, 0.7, 0.2], [0.1, 0.4, 0.2], [0.8, 0.4, 0.2], [0.5, 0.6, 0.2]],
    dtype=np.float32,
)


def crops(split):
    """The crops of one split, as (species name, image) from its folders."""
    rng = np.random.default_rng(0 if split == "train" else 1)
    present = SPECIES if split == "train" else [s for s in SPECIES if s != "elm"]
    names = rng.choice(present, size=3000 if split == "train" else 600)
    yy, xx = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    images = np.empty((len(names), 12, 12, 3), dtype=np.float32)
    for i, name in enumerate(names):
        k = SPECIES.index(name)
        crown = ((yy - 5.5) ** 2 + (xx - 5.5) ** 2) <= rng.uniform(12, 30)
        texture = 0.15 * np.sin((xx + yy * (k % 3)) * (1 + k / 3) + rng.uniform(0, 6))
        background = rng.uniform(0.2, 0.35, size=(12, 12, 3))
        images[i] = np.where(crown[..., None], COLOURS[k] + texture[..., None], background)
        images[i] += rng.normal(scale=0.08, size=(12, 12, 3))
    return names, images


def folder_index(names):  # ImageFolder: the sorted folder names of this split, numbered
    return {name: i for i, name in enumerate(sorted(set(names)))}


class Crops(NumpyDataset):
    def __init__(self, split, **kwargs):
        names, images = crops(split)
        class_to_idx = folder_index(names) if bug else {name: i for i, name in enumerate(sorted(SPECIES))}
        labels = np.array([class_to_idx[name] for name in names], dtype=np.int64)
        super().__init__({"data": images, "classes": labels}, sparse_dims={"classes": len(SPECIES)}, **kwargs)


train = {"class": Crops, "split": "train"}
dev = {"class": Crops, "split": "val"}
extern_data = {"data": {"shape": (12, 12, 3)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 6}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(432, 128), nn.ReLU(), nn.Linear(128, 6))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
