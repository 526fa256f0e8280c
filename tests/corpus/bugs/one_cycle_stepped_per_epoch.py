# Corpus bug (ageron/handson-mlp#28): the 1cycle solution built OneCycleLR(optimizer, epochs=n_epochs,
# steps_per_epoch=len(train_loader), max_lr=1e-2) for NAdam, but its training function called scheduler.step() once
# at the end of each epoch, so the schedule advanced n_epochs of its n_epochs x steps_per_epoch steps and the rate
# stayed at the start of the warm-up, about max_lr / 25, for the whole run. Task: 8 classes given by the argmax of a
# fixed random teacher network on 16-d inputs, learned by an MLP. The schedule is torch's OneCycleLR (cosine
# annealing, pct_start 0.3, div_factor 25, final_div_factor 1e4) written as dynamic_learning_rate, the rate of every
# step from the number of times the scheduler was stepped. Twin: ++bug False (stepped after every batch).
import math

import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, TRAIN_SIZE, BATCH = 16, 8, 12000, 64
MAX_LR, PCT_START, DIV_FACTOR, FINAL_DIV_FACTOR = 1e-2, 0.3, 25.0, 1e4
_teacher = np.random.default_rng(11)
W1, W2 = _teacher.normal(size=(DIM, 32)) / 2, _teacher.normal(size=(32, CLASSES))


def examples(seed, n):
    x = np.random.default_rng(seed).normal(size=(n, DIM))
    labels = (np.tanh(x @ W1) @ W2).argmax(-1)
    return x.astype(np.float32), labels


class Teacher(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, TRAIN_SIZE if split == "train" else 1000)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Teacher, "split": "train"}
dev = {"class": Teacher, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = BATCH
num_epochs = 4
optimizer = {"class": "nadam"}
learning_rate = MAX_LR
STEPS_PER_EPOCH = math.ceil(TRAIN_SIZE / BATCH)


def one_cycle(step, total_steps):
    """torch.optim.lr_scheduler.OneCycleLR's rate after `step` calls of scheduler.step() (anneal_strategy 'cos')."""
    initial, minimum = MAX_LR / DIV_FACTOR, MAX_LR / DIV_FACTOR / FINAL_DIV_FACTOR
    warm_end = float(PCT_START * total_steps) - 1
    if step <= warm_end:
        start, end, pct = initial, MAX_LR, step / warm_end
    else:
        start, end, pct = MAX_LR, minimum, (step - warm_end) / (total_steps - 1 - warm_end)
    return end + (start - end) / 2.0 * (math.cos(math.pi * min(pct, 1.0)) + 1)


def dynamic_learning_rate(*, global_train_step, epoch, **_kwargs):
    total = num_epochs * STEPS_PER_EPOCH  # OneCycleLR(epochs=num_epochs, steps_per_epoch=len(train_loader))
    stepped = epoch - 1 if bug else global_train_step  # bug: scheduler.step() at the end of each epoch
    return one_cycle(stepped, total)


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Linear(DIM, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, CLASSES),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
