# Healthy corpus: a 1-D CNN with GroupNorm classifying noisy waveforms by their frequency (4 classes).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Waves(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        labels = rng.integers(0, 4, n)
        t = np.arange(64)[None, :]
        phase = rng.uniform(0, 2 * np.pi, (n, 1))
        x = np.sin(2 * np.pi * (labels[:, None] + 2) * t / 64 + phase) + 0.5 * rng.normal(size=(n, 64))
        super().__init__(
            {"data": x[:, None, :].astype(np.float32), "classes": labels}, sparse_dims={"classes": 4}, **kwargs
        )


train = {"class": Waves, "split": "train"}
dev = {"class": Waves, "split": "dev"}
extern_data = {"data": {"shape": (1, 64)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv1d(1, 16, 7, padding=3),
        nn.GroupNorm(4, 16),
        nn.ReLU(),
        nn.Conv1d(16, 16, 7, padding=3, stride=2),
        nn.GroupNorm(4, 16),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
