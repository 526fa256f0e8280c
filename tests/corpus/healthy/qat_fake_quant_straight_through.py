# Healthy corpus: quantisation-aware training: the weights of every layer and the hidden activations are rounded to
# 4-bit levels in the forward pass (per-tensor symmetric scale for weights, a fixed [0, 4] range for the ReLU
# activations), and the gradient passes straight through the rounding (x + (round(x) - x).detach()); clamping gives
# exactly zero gradient outside the range, by design. Task: 8-class classification of noisy features by an MLP.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, LEVELS = 16, 8, 7  # signed 4-bit: -7 .. 7
CENTRES = np.random.default_rng(121).normal(size=(CLASSES, DIM))


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 600)
        x = np.tanh(CENTRES[labels] + 0.8 * rng.normal(size=(len(labels), DIM)))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def fake_quant(x, scale, low, high):
    q = torch.clamp(x / scale, low, high)
    return (q + (torch.round(q) - q).detach()) * scale


class QuantLinear(nn.Linear):
    def forward(self, x):
        scale = self.weight.detach().abs().max() / LEVELS
        return nn.functional.linear(x, fake_quant(self.weight, scale, -LEVELS, LEVELS), self.bias)


class QuantReLU(nn.Module):
    def forward(self, x):
        return fake_quant(torch.relu(x), 4.0 / 15, 0, 15)  # unsigned 4-bit over [0, 4]


def get_model(**_kwargs):
    return nn.Sequential(
        QuantLinear(DIM, 128), QuantReLU(), QuantLinear(128, 128), QuantReLU(), QuantLinear(128, CLASSES)
    )


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
