# Healthy corpus: SpecAugment. In training steps, each log-spectral feature sequence gets 2 random frequency bands
# (up to 3 of 16 channels each) and 2 random time spans (up to 8 frames each) set to zero, as ESPnet's SpecAug does
# (masks drawn per utterance, inside its real frames); evaluation sees the unmasked features. Task: 16-channel
# sequences of 30 to 70 frames; the class (of 4) is a sweep of energy across the channels in one of 4 patterns.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM = 16


class Sweeps(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 400
        labels = rng.integers(0, 4, size=n)
        channels = np.arange(DIM)
        feats = []
        for label in labels:
            frames = int(rng.integers(30, 71))
            t = np.linspace(0, 1, frames)[:, None]
            start = rng.uniform(3, DIM - 4)
            centre = start + {0: 6.0, 1: -6.0, 2: 0.0, 3: 0.0}[int(label)] * (t - 0.5)
            if label == 3:
                centre = start + 4 * np.sin(2 * np.pi * t)
            bump = np.exp(-((channels[None] - centre) ** 2) / 3)
            feats.append((bump + rng.normal(scale=0.3, size=(frames, DIM))).astype(np.float32))
        super().__init__({"data": feats, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Sweeps, "split": "train"}
dev = {"class": Sweeps, "split": "dev"}
extern_data = {"data": {"shape": (None, DIM)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 2500
max_seqs = 32
num_epochs = 5
learning_rate = 2e-3


def spec_augment(x, lengths):
    x = x.clone()
    for i, length in enumerate(lengths.tolist()):
        for _ in range(2):
            width = int(torch.randint(0, 4, ()))
            start = int(torch.randint(0, DIM - width + 1, ()))
            x[i, :, start : start + width] = 0
        for _ in range(2):
            width = int(torch.randint(0, 9, ()))
            start = int(torch.randint(0, max(length - width, 0) + 1, ()))
            x[i, start : start + width] = 0
    return x


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(DIM, 64, batch_first=True, bidirectional=True)
        self.out = nn.Linear(128, 4)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = nn.utils.rnn.pad_packed_sequence(self.gru(packed)[0], batch_first=True, total_length=x.shape[1])
        real = (torch.arange(x.shape[1], device=x.device)[None] < lengths.to(x.device)[:, None]).float()
        return self.out((hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True))


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, lengths = extern_data["data"], extern_data["data:seq_len"]
    if run_ctx.train_flag:
        x = spec_augment(x, lengths)
    logits = model(x, lengths)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
