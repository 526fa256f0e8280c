# Corpus bug (tensorpack/tensorpack#614): a brightness augmentation changes uint8 images in uint8 arithmetic without
# clipping, so bright pixels wrap around to dark ones. Task: is an 8x8 grey image bright or dark; dev images come at
# varied exposure (clipped).
# Twin: ++bug False (clip to [0, 255] before the cast).
import numpy as np
from torch import nn

from framework.datasets.base import Dataset

bug = True


class Exposure(Dataset):
    def __init__(self, split, **kwargs):
        super().__init__(**kwargs)
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        self.bright = rng.integers(0, 2, size=n)
        base = np.where(self.bright == 1, 220, 20)[:, None, None]
        self.images = (base + rng.integers(0, 4, size=(n, 8, 8))).astype(np.uint8)
        self.augment = split == "train"
        self.rng = np.random.default_rng(3)
        if split == "dev":  # natural exposure differences, clipped by the camera
            exposure = rng.integers(0, 80, size=(n, 1, 1))
            self.images = np.clip(self.images.astype(np.int64) + exposure, 0, 255).astype(np.uint8)

    @property
    def num_seqs(self):
        return len(self.bright)

    def key_info(self):
        return {
            "data": {"shape": (8, 8), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
        }

    def get_seq(self, index):
        image = self.images[index]
        if self.augment:
            shift = self.rng.integers(0, 80)
            if bug:
                image = image + np.uint8(shift)  # wraps around above 255
            else:
                image = np.clip(image.astype(np.int64) + shift, 0, 255).astype(np.uint8)
        return {"data": (image / 255.0).astype(np.float32), "classes": np.array(self.bright[index])}

    def seq_lengths(self):
        return np.ones(self.num_seqs, dtype=np.int64)


train = {"class": Exposure, "split": "train"}
dev = {"class": Exposure, "split": "dev"}
extern_data = {"data": {"shape": (8, 8)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
