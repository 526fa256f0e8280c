# Healthy corpus: per-sample (instance) normalisation, the same in training and evaluation: each utterance's
# features are normalised by their own mean and standard deviation over its real frames (sentence-level mean and
# variance normalisation, as speechbrain's InputNormalization(norm_type="sentence") or Kaldi's per-utterance CMVN),
# which removes each recording's channel gain and offset. Task: 8-dim feature sequences of 20 to 60 frames with a
# random gain and offset per utterance and feature; the class is the direction a bump moves across the feature
# channels over time (up, down, or staying).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM = 8


class Utterances(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 400
        labels = rng.integers(0, 3, size=n)
        feats = []
        channels = np.arange(DIM)
        for label in labels:
            frames = int(rng.integers(20, 61))
            t = np.linspace(0, 1, frames)[:, None]
            start = rng.uniform(1, DIM - 2)
            centre = start + {0: 3.0, 1: -3.0, 2: 0.0}[int(label)] * (t - 0.5)
            bump = np.exp(-((channels[None] - centre) ** 2) / 2)
            gain, offset = rng.uniform(0.3, 3.0, size=DIM), rng.normal(scale=2.0, size=DIM)
            feats.append((gain * (bump + rng.normal(scale=0.3, size=(frames, DIM))) + offset).astype(np.float32))
        super().__init__({"data": feats, "classes": labels}, sparse_dims={"classes": 3}, **kwargs)


train = {"class": Utterances, "split": "train"}
dev = {"class": Utterances, "split": "dev"}
extern_data = {"data": {"shape": (None, DIM)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3}}
batch_size = 2000
max_seqs = 32
num_epochs = 4
learning_rate = 2e-3


def sentence_norm(x, real):
    """Mean and variance normalisation of each utterance over its real frames; padding stays 0."""
    count = real.sum(1, keepdim=True).clamp(min=1)[..., None]  # [B, 1, 1]
    mean = (x * real[..., None]).sum(1, keepdim=True) / count
    var = (((x - mean) * real[..., None]) ** 2).sum(1, keepdim=True) / count
    return (x - mean) / (var + 1e-5).sqrt() * real[..., None]


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(DIM, 32, 5, padding=2), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2), nn.ReLU()
        )
        self.out = nn.Linear(32, 3)

    def forward(self, x, real):
        hidden = self.conv(sentence_norm(x, real).transpose(1, 2)).transpose(1, 2)  # [B, T, 32]
        pooled = (hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1)
        return self.out(pooled)


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(x.device)
    real = (torch.arange(x.shape[1], device=x.device)[None] < lengths[:, None]).float()
    logits = model(x, real)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
