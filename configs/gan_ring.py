# A GAN on 2-D data: eight Gaussians on a ring, the classic test of whether a generator covers every mode.
#
#   python rnn.py configs/gan_ring.py
#
# Two optimizers (the 'optimizers' option): the discriminator's loss trains only the discriminator's parameters
# and the generator's loss only the generator's, whatever the graph shares (no detach needed for correctness).
# The dev scores measure the samples: modes_missed (the share of the 8 modes that got no sample of a batch) and
# off_mode (the share of samples farther than 3 standard deviations from every mode). See
# docs/several_optimizers.rst.
import math

import numpy as np
import torch
from torch import nn

from framework import run_output_dir

MODES = 8
RADIUS, STD = 2.0, 0.05
NOISE_DIM = 8


def ring(num: int, seed: int) -> np.ndarray:
    """``num`` points of the mixture, one row each."""
    rng = np.random.default_rng(seed)
    angles = 2 * math.pi * rng.integers(0, MODES, num) / MODES
    centers = RADIUS * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return (centers + STD * rng.standard_normal((num, 2))).astype(np.float32)


task = "train"
train = {"class": "NumpyDataset", "arrays": {"data": ring(76800, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": ring(2048, seed=2)}, "seq_ordering": "sorted"}
extern_data = {"data": {"shape": (2,)}}
batch_size = 256
num_epochs = 10
learning_rate = 1e-3
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}
output_dir = run_output_dir()  # output/gan_ring
model = output_dir + "/model"
log_verbosity = 4


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)
        )
        self.discriminator = nn.Sequential(
            nn.Linear(2, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1)
        )

    def sample(self, num: int) -> torch.Tensor:
        return self.generator(torch.randn(num, NOISE_DIM, device=self.discriminator[0].weight.device))


def get_model(*, epoch, step, **_kwargs):
    return GAN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    bce = nn.functional.binary_cross_entropy_with_logits
    real_logits, fake_logits = model.discriminator(real), model.discriminator(fake)
    # The discriminator tells real from generated; the generator makes the discriminator call its samples real
    # (the non-saturating loss). Each loss trains its own network only.
    d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    run_ctx.mark_as_loss(bce(fake_logits, torch.ones_like(fake_logits)), "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            angles = 2 * math.pi * torch.arange(MODES, device=real.device) / MODES
            centers = RADIUS * torch.stack([angles.cos(), angles.sin()], dim=1)
            distance, nearest = torch.cdist(fake, centers).min(dim=1)
            covered = torch.zeros(MODES, device=real.device).index_fill(0, nearest[distance < 3 * STD], 1.0)
        run_ctx.mark_as_loss(1 - covered.mean(), "modes_missed", as_error=True)
        run_ctx.mark_as_loss((distance >= 3 * STD).float().mean(), "off_mode", as_error=True)
