# Corpus bug (open-edge-platform/physical-ai-studio#403): a step decay raises the configured decay value to the number
# of drops, but the value (2.5e-6) was meant as the final learning rate, not a factor: after the first drop the rate
# collapses to ~0. Task: XOR of two signs, warmup then a drop every 60 steps. Twin: ++bug False (a factor of 0.5).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WARMUP, DROP_EVERY, DECAY_VALUE = 20, 60, 2.5e-6


class Xor(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Xor, "split": "train"}
dev = {"class": Xor, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    if global_train_step < WARMUP:
        return learning_rate * global_train_step / WARMUP
    drops = global_train_step // DROP_EVERY
    return learning_rate * (DECAY_VALUE if bug else 0.5) ** min(drops, 3)


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
