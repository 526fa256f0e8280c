# Corpus bug (tensorflow/tensorflow#47755): the segmentation tutorial mapped its loading function, which also drew the
# random augmentation, and called .cache() on the result, so the augmentation was drawn once in the first epoch and
# the cached augmented copy was replayed in every later epoch: the augmentation enlarged nothing. Task: 300 training
# signals of 48 samples, each holding one of 5 short class patterns at some position in noise; dev holds the
# patterns anywhere. The training set's augmentation (a random circular shift and fresh noise, drawn in get_seq) is
# what lets an MLP, which is not shift-invariant, see the patterns at every position. The dataset keeps what
# get_seq made in a cache, as the tutorial's pipeline does after map(). Twin: ++bug False (the cache holds the clean
# signal and the augmentation is drawn after it, every epoch).
import numpy as np
from torch import nn

from framework.datasets.base import Dataset

bug = True
LENGTH, WIDTH, CLASSES = 48, 8, 5
PATTERNS = np.random.default_rng(13).normal(size=(CLASSES, WIDTH)) * 1.5


def signals(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = rng.normal(0.0, 0.5, size=(n, LENGTH))
    for i, label in enumerate(labels):
        start = rng.integers(0, LENGTH - WIDTH + 1)
        x[i, start : start + WIDTH] += PATTERNS[label]
    return x.astype(np.float32), labels


class Signals(Dataset):
    def __init__(self, split, **kwargs):
        super().__init__(**kwargs)
        self.augment = split == "train"
        self.x, self.labels = signals(0 if split == "train" else 1, 300 if split == "train" else 1000)
        self.rng = np.random.default_rng(17 if split == "train" else 18)
        self.cache = {}

    @property
    def num_seqs(self):
        return len(self.labels)

    def key_info(self):
        return {
            "data": {"shape": (LENGTH,), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
        }

    def random_shift_and_noise(self, x):
        shifted = np.roll(x, int(self.rng.integers(0, LENGTH)))
        return (shifted + self.rng.normal(0.0, 0.2, size=LENGTH)).astype(np.float32)

    def load(self, index):
        x = self.x[index]
        if self.augment and bug:  # the augmentation is part of the mapped loading, before the cache
            x = self.random_shift_and_noise(x)
        return x

    def get_seq(self, index):
        if index not in self.cache:
            self.cache[index] = self.load(index)
        x = self.cache[index]
        if self.augment and not bug:  # the augmentation after the cache: drawn anew every time
            x = self.random_shift_and_noise(x)
        return {"data": x, "classes": np.array(self.labels[index])}


train = {"class": Signals, "split": "train"}
dev = {"class": Signals, "split": "dev"}
extern_data = {"data": {"shape": (LENGTH,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 12
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(LENGTH, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
