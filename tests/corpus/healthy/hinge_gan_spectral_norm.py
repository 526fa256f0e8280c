# Healthy corpus: an SNGAN-style GAN (Miyato et al.; pfnet-research/sngan_projection): every layer of the
# discriminator under spectral normalisation (torch.nn.utils.parametrizations.spectral_norm), the hinge loss
# relu(1 - D(x)) + relu(1 + D(G(z))) for the discriminator and -D(G(z)) for the generator, Adam with betas (0.0, 0.9)
# as in the reference, each player its own optimizer. Five discriminator updates per generator update
# (n_dis = 5) and a rate of 2e-4, as in the reference. Data: a ring of eight 2-D Gaussians. The error is a sliced
# Wasserstein distance between a batch of samples and the real dev batch.
import math

import numpy as np
import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

NOISE_DIM, N_DIS = 8, 5


def ring(num, seed):
    rng = np.random.default_rng(seed)
    angles = 2 * math.pi * rng.integers(0, 8, num) / 8
    points = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1) + 0.05 * rng.standard_normal((num, 2))
    return points.astype(np.float32)


train = {"class": "NumpyDataset", "arrays": {"data": ring(25600, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": ring(2048, seed=2)}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 128
num_epochs = 20
learning_rate = 2e-4
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.0, 0.9)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.0, 0.9)},
}
ANGLES = torch.arange(32) * math.pi / 32
DIRECTIONS = torch.stack([ANGLES.cos(), ANGLES.sin()])


class SNGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)
        )
        self.discriminator = nn.Sequential(
            spectral_norm(nn.Linear(2, 128)),
            nn.LeakyReLU(0.1),
            spectral_norm(nn.Linear(128, 128)),
            nn.LeakyReLU(0.1),
            spectral_norm(nn.Linear(128, 1)),
        )

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return SNGAN()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    real_out, fake_out = model.discriminator(real), model.discriminator(fake)
    d_loss = nn.functional.relu(1 - real_out).mean() + nn.functional.relu(1 + fake_out).mean()
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    if not run_ctx.train_flag or run_ctx.step % N_DIS == N_DIS - 1:
        run_ctx.mark_as_loss(-fake_out.mean(), "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
