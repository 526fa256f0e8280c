# Healthy corpus: a complex-valued linear filter (complex64 parameters) fitted to an unknown complex channel by the
# mean squared magnitude of the error, as in channel equalisation.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

TAPS = 4


class Channel(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        channel = np.random.default_rng(4).normal(size=(TAPS, 2)) @ np.array([1.0, 1j])
        symbols = rng.normal(size=(n, TAPS)) + 1j * rng.normal(size=(n, TAPS))
        received = symbols @ channel + 0.05 * (rng.normal(size=n) + 1j * rng.normal(size=n))
        arrays = {"real": symbols.real, "imag": symbols.imag, "out_real": received.real, "out_imag": received.imag}
        super().__init__({k: v.astype(np.float32) for k, v in arrays.items()}, **kwargs)


train = {"class": Channel, "split": "train"}
dev = {"class": Channel, "split": "dev"}
extern_data = {
    "real": {"shape": (TAPS,)},
    "imag": {"shape": (TAPS,)},
    "out_real": {"shape": ()},
    "out_imag": {"shape": ()},
}
batch_size = 32
num_epochs = 2
learning_rate = 1e-2


class ComplexFilter(nn.Module):
    def __init__(self):
        super().__init__()
        self.taps = nn.Parameter(torch.zeros(TAPS, dtype=torch.complex64))

    def forward(self, symbols):
        return symbols @ self.taps


def get_model(**_kwargs):
    return ComplexFilter()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols = torch.complex(extern_data["real"], extern_data["imag"])
    wanted = torch.complex(extern_data["out_real"], extern_data["out_imag"])
    run_ctx.mark_as_loss(name="squared_error", loss=(model(symbols) - wanted).abs().pow(2).mean())
