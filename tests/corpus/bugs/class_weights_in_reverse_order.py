# Corpus bug (amanshenoy/multilogue-net#21): the class weights meant to counter an imbalance are written in the
# wrong order, so the frequent class gets the large weight. Task: a 90/10 imbalanced binary task; the error is the
# rare class's miss rate (recall error), which the imbalance hurts. Twin: ++bug False (each class weighted by the
# inverse of its own frequency).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SHARES = (0.9, 0.1)


class Imbalanced(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = (rng.random(4000 if split == "train" else 2000) < SHARES[1]).astype(np.int64)
        x = (rng.normal(size=(len(labels), 8)) + 0.5 * labels[:, None]).astype(np.float32)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Imbalanced, "split": "train"}
dev = {"class": Imbalanced, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    weights = [1 / SHARES[1], 1 / SHARES[0]] if bug else [1 / SHARES[0], 1 / SHARES[1]]
    weight = torch.tensor(weights, device=logits.device)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets, weight=weight))
    rare = targets == 1
    missed = ((logits.argmax(-1) != 1) & rare).float().sum()
    run_ctx.mark_as_loss(name="err", loss=missed, as_error=True, custom_inv_norm_factor=rare.sum().clamp(min=1))
