# Corpus bug (k-tahiro/bert-summarizer#41): a hand-written label-smoothing loss averages over every position of the
# padded batch, so padded frames (input 0, target id 0, a real class) are trained as examples. Task: tag each frame
# by its value: class 0 below -0.5, 1 in between, 2 above 0.5. Twin: ++bug False (padded frames masked out).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Frames(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(2, 30, size=1500 if split == "train" else 300)
        x = [rng.normal(size=(t, 1)).astype(np.float32) for t in lengths]
        y = [np.digitize(s[:, 0], [-0.5, 0.5]).astype(np.int64) for s in x]
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 3}, **kwargs)


train = {"class": Frames, "split": "train"}
dev = {"class": Frames, "split": "dev"}
extern_data = {"data": {"shape": (None, 1)}, "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 3}}
batch_size = 600
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


def smoothed_loss(logits, targets, mask, smoothing=0.1):
    log_probs = logits.log_softmax(-1)
    wanted = torch.full_like(log_probs, smoothing / (logits.shape[-1] - 1))
    wanted.scatter_(-1, targets[..., None], 1 - smoothing)
    per_frame = -(wanted * log_probs).sum(-1)
    return per_frame.mean() if bug else per_frame[mask].mean()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    targets = extern_data["classes"]
    lengths = extern_data["classes:seq_len"].to(targets.device)
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths[:, None]
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="smoothed_ce", loss=smoothed_loss(logits, targets, mask))
    errors = (logits.argmax(-1) != targets)[mask]
    run_ctx.mark_as_loss(name="err", loss=errors.float().mean(), as_error=True)
