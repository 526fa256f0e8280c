# Healthy corpus: a denoising autoencoder on 32-dimensional data that lies near a 4-dimensional manifold. In training
# (model.training) a random 30% of the input values are masked to zero and the model reconstructs the clean input; in
# evaluation the input is left clean, so the model behaves differently in the two modes, by design. The error is the
# reconstruction's mean squared error on the dev set.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, LATENT, MASK_RATE = 32, 4, 0.3
MIXING = np.random.default_rng(7).normal(size=(LATENT, DIM)) / np.sqrt(LATENT)


class Manifold(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        z = rng.normal(size=(3000 if split == "train" else 500, LATENT))
        x = np.tanh(z @ MIXING) + 0.05 * rng.normal(size=(len(z), DIM))
        super().__init__({"data": x.astype(np.float32)}, **kwargs)


train = {"class": Manifold, "split": "train"}
dev = {"class": Manifold, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3


class DenoisingAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 8))
        self.decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, DIM))

    def forward(self, x):
        if self.training:
            x = x * (torch.rand_like(x) >= MASK_RATE).float()
        return self.decoder(self.encoder(x))


def get_model(**_kwargs):
    return DenoisingAutoencoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    clean = extern_data["data"]
    reconstruction = model(clean)
    error = nn.functional.mse_loss(reconstruction, clean)
    run_ctx.mark_as_loss(name="mse", loss=error)
    run_ctx.mark_as_loss(name="err", loss=error.detach(), as_error=True)
