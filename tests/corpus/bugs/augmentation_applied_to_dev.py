# Corpus bug (gpleiss/efficient_densenet_pytorch#51): the random training transform (here: strong noise and random
# feature dropout) is attached before the split, so the dev data are augmented too. Task: 4 Gaussian clusters.
# Twin: ++bug False (dev read as it is).
import numpy as np
from torch import nn

from framework.datasets.base import Dataset

bug = True


class Clusters(Dataset):
    def __init__(self, split, **kwargs):
        super().__init__(**kwargs)
        rng = np.random.default_rng(0 if split == "train" else 1)
        self.labels = rng.integers(0, 4, size=2000 if split == "train" else 500)
        centers = np.random.default_rng(5).normal(size=(4, 8)) * 1.2
        self.x = (centers[self.labels] + 0.4 * rng.normal(size=(len(self.labels), 8))).astype(np.float32)
        self.augment = split == "train" or bug
        self.rng = np.random.default_rng(3)

    @property
    def num_seqs(self):
        return len(self.x)

    def key_info(self):
        return {
            "data": {"shape": (8,), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
        }

    def get_seq(self, index):
        x = self.x[index]
        if self.augment:
            keep = self.rng.uniform(size=8) > 0.5
            x = ((x + self.rng.normal(scale=0.8, size=8)) * keep).astype(np.float32)
        return {"data": x, "classes": np.array(self.labels[index])}

    def seq_lengths(self):
        return np.ones(self.num_seqs, dtype=np.int64)


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
