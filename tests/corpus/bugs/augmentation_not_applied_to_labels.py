# Corpus bug (mdbloice/Augmentor#188): a random flip is applied to the input but not to its per-position labels, so
# half of the augmented training pairs are misaligned. Task: tag each of 12 frames by its sign; training flips the
# sequence in time with probability 0.5. Twin: ++bug False (the labels are flipped with their input).
import numpy as np
from torch import nn

from framework.datasets.base import Dataset

bug = True


class Frames(Dataset):
    def __init__(self, split, **kwargs):
        super().__init__(**kwargs)
        rng = np.random.default_rng(0 if split == "train" else 1)
        self.x = rng.normal(size=(2000 if split == "train" else 400, 12, 1)).astype(np.float32)
        self.y = (self.x[..., 0] > 0).astype(np.int64)
        self.augment = split == "train"
        self.rng = np.random.default_rng(3)

    @property
    def num_seqs(self):
        return len(self.x)

    def key_info(self):
        return {
            "data": {"shape": (12, 1), "dtype": "float32"},
            "classes": {"shape": (12,), "dtype": "int64", "sparse_dim": 2},
        }

    def get_seq(self, index):
        x, y = self.x[index], self.y[index]
        if self.augment and self.rng.uniform() < 0.5:
            x = x[::-1].copy()
            if not bug:
                y = y[::-1].copy()
        return {"data": x, "classes": y}

    def seq_lengths(self):
        return np.ones(self.num_seqs, dtype=np.int64)


train = {"class": Frames, "split": "train"}
dev = {"class": Frames, "split": "dev"}
extern_data = {"data": {"shape": (12, 1)}, "classes": {"shape": (12,), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 24), nn.Unflatten(1, (12, 2)))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
