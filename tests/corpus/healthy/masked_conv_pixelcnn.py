# Healthy corpus: PixelCNN-style masked 1-D convolutions predicting each value of a binary sequence from the values
# before it. The future half of each kernel is multiplied by a fixed mask every forward: those weights never get a
# gradient, by design.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Markov(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n, length = 2000 if split == "train" else 300, 32
        bits = np.zeros((n, length), dtype=np.int64)
        bits[:, 0] = rng.integers(0, 2, n)
        for t in range(1, length):
            stay = rng.uniform(size=n) < 0.9
            bits[:, t] = np.where(stay, bits[:, t - 1], 1 - bits[:, t - 1])
        super().__init__({"data": bits}, sparse_dims={"data": 2}, **kwargs)


train = {"class": Markov, "split": "train"}
dev = {"class": Markov, "split": "dev"}
extern_data = {"data": {"shape": (32,), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class MaskedConv1d(nn.Conv1d):
    def __init__(self, *args, include_center, **kwargs):
        super().__init__(*args, **kwargs)
        mask = torch.ones_like(self.weight)
        center = self.kernel_size[0] // 2
        mask[:, :, center + (1 if include_center else 0) :] = 0
        self.register_buffer("mask", mask)

    def forward(self, x):
        return nn.functional.conv1d(x, self.weight * self.mask, self.bias, padding=self.padding)


class PixelCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(2, 16)
        self.first = MaskedConv1d(16, 32, 5, padding=2, include_center=False)
        self.second = MaskedConv1d(32, 32, 5, padding=2, include_center=True)
        self.out = nn.Conv1d(32, 2, 1)

    def forward(self, bits):
        h = self.embed(bits).transpose(1, 2)
        return self.out(torch.relu(self.second(torch.relu(self.first(h)))))


def get_model(**_kwargs):
    return PixelCnn()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    bits = extern_data["data"]
    logits = model(bits)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, bits))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(1) != bits).float().mean(), as_error=True)
