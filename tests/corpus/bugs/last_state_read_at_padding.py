# Corpus bug (vgel/repeng#38): the state of the last position of each row is read, which under right padding is a
# padding position for all but the longest sequence of the batch. Task: the sign of the last real frame of a
# variable-length sequence, through a GRU. Twin: ++bug False (each row read at its own last real frame).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(3, 30, size=1500 if split == "train" else 400)
        x = [rng.normal(size=(t, 2)).astype(np.float32) for t in lengths]
        y = np.array([int(s[-1, 0] > 0) for s in x])
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {"data": {"shape": (None, 2)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 600
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class LastState(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(2, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, x, lengths):
        states, _ = self.rnn(x)
        if bug:
            last = states[:, -1]
        else:
            last = states[torch.arange(x.shape[0], device=x.device), lengths.to(x.device) - 1]
        return self.out(last)


def get_model(**_kwargs):
    return LastState()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
