# Corpus bug (torchgeo/torchgeo#791): a multi-label classifier, trained correctly with a per-label sigmoid and binary
# cross-entropy, is scored by putting its outputs through a SOFTMAX before the 0.5 threshold: the label
# probabilities of an example then sum to one, so an example with two or more true labels can never have them all
# above the threshold, and the reported error is far worse than the model. Task: 6 tags, 1 to 3 per example, the
# features a noisy sum of the tags' prototypes; the error is the Hamming error (wrong tag decisions / all of them).
# Twin: ++bug False (sigmoid before the threshold).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
TAGS, DIM = 6, 16
PROTOTYPES = np.random.default_rng(4).normal(size=(TAGS, DIM)).astype(np.float32)


class Tagged(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        tags = np.zeros((n, TAGS), dtype=np.float32)
        for i in range(n):
            tags[i, rng.choice(TAGS, size=rng.integers(1, 4), replace=False)] = 1.0
        x = tags @ PROTOTYPES + rng.normal(size=(n, DIM)).astype(np.float32) * 0.5
        super().__init__({"data": x.astype(np.float32), "tags": tags}, **kwargs)


train = {"class": Tagged, "split": "train"}
dev = {"class": Tagged, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "tags": {"shape": (TAGS,)}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, TAGS))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    tags = extern_data["tags"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, tags))
    probabilities = torch.softmax(logits, dim=-1) if bug else torch.sigmoid(logits)
    predicted = (probabilities > 0.5).float()
    run_ctx.mark_as_loss(name="err", loss=(predicted != tags).float().mean(), as_error=True)
