# Corpus bug (lucidrains/halonet-pytorch#6): the boolean mask is True at the real frames and is used as the set of
# positions to blank out, so attention pooling reads only the padding. Task: the sign of the mean of the first
# feature over a variable-length sequence. Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(4, 20, size=1500 if split == "train" else 400)
        x = [rng.normal(size=(t, 4)).astype(np.float32) for t in lengths]
        y = np.array([int(s[:, 0].mean() > 0) for s in x])
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {"data": {"shape": (None, 4)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 400
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class AttentionPooling(nn.Module):
    def __init__(self):
        super().__init__()
        self.frame = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32))
        self.query = nn.Linear(32, 1)
        self.out = nn.Linear(32, 2)

    def forward(self, x, lengths):
        h = self.frame(x)
        valid = torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]
        blanked = valid if bug else ~valid
        weights = self.query(h).squeeze(-1).masked_fill(blanked, -1e9).softmax(-1)
        return self.out((weights[..., None] * h).sum(1))


def get_model(**_kwargs):
    return AttentionPooling()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
