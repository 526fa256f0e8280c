# Library zoo: a Wasserstein GAN with gradient penalty on a 2-D mixture (the WGAN-GP paper's toy setting, written
# small): the critic's loss is the mean score of generated samples minus that of real ones, so the bias of its
# last layer cancels and never gets a gradient, by design; four critic updates per generator update.
import math

import numpy as np
import torch
from torch import nn

RNG = np.random.default_rng(0)
ANGLES = 2 * math.pi * RNG.integers(0, 6, 4096) / 6
POINTS = (np.stack([np.cos(ANGLES), np.sin(ANGLES)], 1) + 0.05 * RNG.standard_normal((4096, 2))).astype(np.float32)

train = {"class": "NumpyDataset", "arrays": {"data": POINTS[:3072]}}
dev = {"class": "NumpyDataset", "arrays": {"data": POINTS[3072:]}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 128
num_epochs = 2
learning_rate = 1e-3
optimizers = {
    "critic": {"class": "adam", "params": "critic.*", "betas": (0.5, 0.9)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.9)},
}


class WassersteinGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))


def get_model(**_kwargs):
    return WassersteinGAN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.generator(torch.randn(len(real), 4, device=real.device))
    critic_loss = model.critic(fake.detach()).mean() - model.critic(real).mean()
    if run_ctx.train_flag:  # the penalty keeps the critic 1-Lipschitz on interpolates
        mix = torch.rand(len(real), 1, device=real.device)
        between = (mix * real + (1 - mix) * fake.detach()).requires_grad_(True)
        (slope,) = torch.autograd.grad(model.critic(between).sum(), between, create_graph=True)
        critic_loss = critic_loss + 10 * ((slope.norm(dim=1) - 1) ** 2).mean()
    run_ctx.mark_as_loss(critic_loss, "critic", optimizer="critic")
    if run_ctx.step % 4 == 3:
        run_ctx.mark_as_loss(-model.critic(fake).mean(), "generator", optimizer="generator")
