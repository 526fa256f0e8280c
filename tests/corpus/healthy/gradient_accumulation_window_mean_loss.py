# Healthy corpus: gradient accumulation (accelerate's usage guide): micro-batches of 8 whose gradients are summed over
# a window of 4 (accum_grad_multiple_step = 4) before each update, so gradients are deliberately not cleared between
# micro-batches and the update is that of the window's mean loss. Task: 10-class classification of noisy, nonlinearly
# mixed features by an MLP.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES = 16, 10
CENTRES = np.random.default_rng(51).normal(size=(CLASSES, DIM))
MIX = np.random.default_rng(52).normal(size=(DIM, DIM)) / np.sqrt(DIM)


class Features(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=2400 if split == "train" else 500)
        x = np.tanh((CENTRES[labels] + 0.8 * rng.normal(size=(len(labels), DIM))) @ MIX)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Features, "split": "train"}
dev = {"class": Features, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 8
accum_grad_multiple_step = 4
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
