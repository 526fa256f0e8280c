# Healthy corpus: frame-level tagging of feature sequences (speech-style voice activity) with 1-D convolutions
# over time, the padding masked in the loss (cross_entropy with reduction="none", summed over real frames,
# divided by their count). A frame is "speech" when its energy feature is high, smoothed by its neighbours.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_feats, _tags = [], []
for _ in range(800):
    _n = int(_rng.integers(20, 60))
    _on = (np.convolve(_rng.random(_n) < 0.3, np.ones(5), "same") > 1).astype(np.int64)
    _feats.append((_rng.normal(size=(_n, 4)) + 1.5 * _on[:, None] * np.array([1.0, 0.5, 0, 0])).astype(np.float32))
    _tags.append(_on)
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _feats[:640], "classes": _tags[:640]},
    "sparse_dims": {"classes": 2},
}
dev = {"class": "NumpyDataset", "arrays": {"data": _feats[640:], "classes": _tags[640:]}, "sparse_dims": {"classes": 2}}
extern_data = {"data": {"shape": (None, 4)}, "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2}}
batch_size = 400
max_seqs = 8
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Conv1d(4, 32, 5, padding=2), nn.ReLU(), nn.Conv1d(32, 2, 5, padding=2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, tags = extern_data["data"], extern_data["classes"]
    real = torch.arange(x.shape[1], device=x.device)[None] < extern_data["data:seq_len"].to(x.device)[:, None]
    logits = model(x.transpose(1, 2)).transpose(1, 2)
    ce = nn.functional.cross_entropy(logits.reshape(-1, 2), tags.reshape(-1), reduction="none").view_as(tags)
    run_ctx.mark_as_loss(name="ce", loss=(ce * real).sum() / real.sum())
