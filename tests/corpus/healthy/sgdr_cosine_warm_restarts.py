# Healthy corpus: SGDR (Loshchilov and Hutter 2017), cosine annealing with warm restarts, as torch's
# CosineAnnealingWarmRestarts(T_0 = one epoch of steps, T_mult = 1, eta_min = 1% of the peak) stepped per batch: the
# rate falls to 1% of its peak at the end of each epoch and jumps back to the peak at the first step of the next.
# SGD with momentum on 8 classes given by a fixed random teacher network on 16-d inputs.
import math

import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, TRAIN_SIZE, BATCH, PEAK = 16, 8, 4000, 32, 0.05
_teacher = np.random.default_rng(11)
W1, W2 = _teacher.normal(size=(DIM, 32)) / 2, _teacher.normal(size=(32, CLASSES))
CYCLE = math.ceil(TRAIN_SIZE / BATCH)


def examples(seed, n):
    x = np.random.default_rng(seed).normal(size=(n, DIM))
    return x.astype(np.float32), (np.tanh(x @ W1) @ W2).argmax(-1)


class Teacher(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, TRAIN_SIZE if split == "train" else 800)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def dynamic_learning_rate(*, global_train_step, **_kwargs):
    minimum, position = PEAK * 0.01, global_train_step % CYCLE  # a restart at every cycle
    return minimum + (PEAK - minimum) * (1 + math.cos(math.pi * position / CYCLE)) / 2


train = {"class": Teacher, "split": "train"}
dev = {"class": Teacher, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = BATCH
num_epochs = 5
optimizer = {"class": "sgd", "momentum": 0.9}
learning_rate = PEAK


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
