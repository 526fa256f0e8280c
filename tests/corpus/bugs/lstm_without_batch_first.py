# Corpus bug (AndersonJo/dqn-pytorch#1): an LSTM built without batch_first=True is fed [batch, time, features], so
# its recurrence runs across the examples of a batch. Task: the sign of the sum of a noisy sequence.
# Twin: ++bug False.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(2000 if split == "train" else 400, 10, 4)).astype(np.float32)
        y = (x[:, :, 0].sum(axis=1) > 0).astype(np.int64)
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (10, 4)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Summer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 32, batch_first=not bug)
        self.out = nn.Linear(32, 2)

    def forward(self, x):
        states, _ = self.lstm(x)
        return self.out(states[:, -1])


def get_model(**_kwargs):
    return Summer()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
