# Healthy corpus: a least-squares GAN (Mao et al.), as in PyTorch-GAN's implementations/lsgan/lsgan.py: the
# discriminator has a linear output regressed by MSE to 1 on real and 0 on generated samples, the generator's samples
# are regressed to 1; Adam(0.5, 0.999) for each player, each its own optimizer. Data: a ring of eight 2-D Gaussians.
# The error is a sliced Wasserstein distance between a batch of samples and the real dev batch.
import math

import numpy as np
import torch
from torch import nn

MODES, RADIUS, STD, NOISE_DIM = 8, 2.0, 0.05, 8


def ring(num, seed):
    rng = np.random.default_rng(seed)
    angles = 2 * math.pi * rng.integers(0, MODES, num) / MODES
    points = RADIUS * np.stack([np.cos(angles), np.sin(angles)], axis=1) + STD * rng.standard_normal((num, 2))
    return points.astype(np.float32)


train = {"class": "NumpyDataset", "arrays": {"data": ring(25600, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": ring(2048, seed=2)}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 128
num_epochs = 12
learning_rate = 1e-3
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}
ANGLES = torch.arange(32) * math.pi / 32
DIRECTIONS = torch.stack([ANGLES.cos(), ANGLES.sin()])


class LSGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)
        )
        self.discriminator = nn.Sequential(
            nn.Linear(2, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1)
        )

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return LSGAN()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    real_out, fake_out = model.discriminator(real), model.discriminator(fake)
    mse = nn.functional.mse_loss
    d_loss = 0.5 * (mse(real_out, torch.ones_like(real_out)) + mse(fake_out, torch.zeros_like(fake_out)))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    run_ctx.mark_as_loss(mse(fake_out, torch.ones_like(fake_out)), "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
