# Corpus bug (deep-voice/soundbay#49): to balance an imbalanced data set, the epoch's order is drawn by weighted
# sampling with replacement, but the sampler gets one weight per CLASS instead of one per example. It draws indices
# below the number of weights, so every epoch is made of copies of the first four examples of the data set.
# Task: 4 imbalanced Gaussian classes; the error is the balanced (per-class mean) error on dev.
# Twin: ++bug False (each example weighted by the inverse frequency of its class).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SHARES = np.array([0.55, 0.25, 0.12, 0.08])


class Imbalanced(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        centres = np.random.default_rng(5).normal(size=(4, 8)) * 1.2
        labels = rng.choice(4, size=3000 if split == "train" else 1000, p=SHARES)
        x = (centres[labels] + rng.normal(size=(len(labels), 8))).astype(np.float32)
        self.weighted = split == "train"
        self.labels = labels
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)

    def get_seq_order(self, epoch):
        if not self.weighted:
            return np.arange(self.num_seqs)
        counts = np.bincount(self.labels, minlength=4)
        class_weights = 1.0 / counts
        weights = class_weights if bug else class_weights[self.labels]
        rng = np.random.default_rng([self.random_seed, epoch])
        return rng.choice(len(weights), size=self.num_seqs, replace=True, p=weights / weights.sum())


train = {"class": Imbalanced, "split": "train"}
dev = {"class": Imbalanced, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    # balanced error: each example weighted by 1 / (4 * count of its class in the batch)
    counts = torch.bincount(targets, minlength=4).float()
    weight = 1.0 / (counts[targets] * (counts > 0).sum())
    wrong = (logits.argmax(-1) != targets).float()
    run_ctx.mark_as_loss(name="err", loss=(wrong * weight).sum(), as_error=True)
