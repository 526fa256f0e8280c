# Corpus bug (dbiir/UER-py#190): frame states are averaged over the whole padded length, padding included. Task: is
# the mean of a variable-length signal above 0.2. Twin: ++bug False (mean over the real frames).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Signals(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(3, 30, size=1500 if split == "train" else 400)
        x = [(0.2 + rng.normal(size=(t, 1))).astype(np.float32) for t in lengths]
        y = np.array([int(s.mean() > 0.2) for s in x])
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Signals, "split": "train"}
dev = {"class": Signals, "split": "dev"}
extern_data = {"data": {"shape": (None, 1)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 600
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class MeanPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.frame = nn.Linear(1, 16)
        self.out = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, frames, lengths):
        states = self.frame(frames)
        if bug:
            pooled = states.mean(1)
        else:
            mask = torch.arange(frames.shape[1], device=frames.device)[None, :] < lengths.to(frames.device)[:, None]
            pooled = (states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.out(pooled)


def get_model(**_kwargs):
    return MeanPool()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
