# Corpus bug (https-deeplearning-ai/GANs-Public#1): the adversarial loss helper gives real samples the label 0 and
# generated ones the label 1; the discriminator is trained with it, and the generator's adversarial term also asks
# for the label 1, so both players push the discriminator to call the fakes fake and the generator is driven away
# from the data. Task: a GAN on eight 2-D Gaussians on a ring, BCE losses, Adam(0.5, 0.999) for each player (each its
# own optimizer). The error is a sliced Wasserstein distance between a batch of samples and the real dev batch.
# Twin: ++bug False (the discriminator labels real 1 and fake 0, as the generator's target assumes).
import math

import numpy as np
import torch
from torch import nn

bug = True
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
DIRECTIONS = torch.stack([ANGLES.cos(), ANGLES.sin()])  # [2, 32]


class GAN(nn.Module):
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
    return GAN()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def adversarial_loss(logits, is_real):
    if bug:
        target = torch.zeros_like(logits) if is_real else torch.ones_like(logits)
    else:
        target = torch.ones_like(logits) if is_real else torch.zeros_like(logits)
    return nn.functional.binary_cross_entropy_with_logits(logits, target)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    real_logits, fake_logits = model.discriminator(real), model.discriminator(fake)
    d_loss = 0.5 * (adversarial_loss(real_logits, True) + adversarial_loss(fake_logits, False))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    # the generator asks the discriminator for the label 1 on its samples
    g_loss = nn.functional.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
    run_ctx.mark_as_loss(g_loss, "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
