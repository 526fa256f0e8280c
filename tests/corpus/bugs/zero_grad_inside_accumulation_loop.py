# Corpus bug (bytetriper/RAE#67): train.py calls optimizer.zero_grad(set_to_none=True) inside the inner micro-batch
# loop, so the gradients are cleared before every micro-batch instead of once per update: each optimizer step uses
# only the last micro-batch's gradient of its accumulation window. Task: 10-class classification of noisy, nonlinearly
# mixed features by an MLP, micro-batches of 8 accumulated over 4 (accum_grad_multiple_step = 4); the zero_grad of the
# inner loop is a callback at the start of every micro-batch's step. Twin: ++bug False (the callback does nothing: the
# framework clears the gradients once per window, after the update).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES = 16, 10
CENTRES = np.random.default_rng(29).normal(size=(CLASSES, DIM))
MIX = np.random.default_rng(30).normal(size=(DIM, DIM)) / np.sqrt(DIM)


class Features(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=2400 if split == "train" else 500)
        x = np.tanh((CENTRES[labels] + 1.1 * rng.normal(size=(len(labels), DIM))) @ MIX)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def zero_grad_in_micro_loop(state):
    if bug:  # read at call time: ++bug False applies after the file ran
        state.optimizer.zero_grad(set_to_none=True)


train = {"class": Features, "split": "train"}
dev = {"class": Features, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 8
accum_grad_multiple_step = 4
num_epochs = 3
learning_rate = 1e-3
callbacks = {"step_start": zero_grad_in_micro_loop}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
