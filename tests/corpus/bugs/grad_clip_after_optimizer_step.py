# Corpus bug (VGraphRNN/VGRNN#4): both training scripts called torch.nn.utils.clip_grad_norm() after opt.step(), when
# the update had already used the unclipped gradients (and they were cleared before the next backward), so the
# clipping never acted and large gradients reached the parameters unchanged. Task: 6-class classification of 20-d
# features where 3% of the training inputs are corrupted (a glitch that multiplies them by 40), by an MLP under SGD
# with momentum (rate 0.05), clipped to a global norm of 1; the training loop's clip is a callback. Twin: ++bug False
# (the clip runs between backward and the optimizer step).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, MAX_NORM = 20, 6, 1.0
CENTRES = np.random.default_rng(101).normal(size=(CLASSES, DIM))


class Readings(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=2400 if split == "train" else 600)
        x = CENTRES[labels] + 1.1 * rng.normal(size=(len(labels), DIM))
        if split == "train":
            x[rng.random(len(labels)) < 0.03] *= 40.0
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def clip(state):
    torch.nn.utils.clip_grad_norm_(state.model.parameters(), MAX_NORM)


def clip_before_step(state):
    if not bug:  # read at call time: ++bug False applies after the file ran
        clip(state)


def clip_after_step(state):
    if bug:
        clip(state)  # the update has already been made with the unclipped gradients


train = {"class": Readings, "split": "train"}
dev = {"class": Readings, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 0.05
optimizer = {"class": "sgd", "momentum": 0.9}
callbacks = {"before_optimizer_step": clip_before_step, "after_optimizer_step": clip_after_step}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
