# Healthy corpus: WGAN-GP on 2-D toy data, as in improved_wgan_training's gan_toy.py (eight Gaussians, MLP generator
# and critic of three ReLU layers, narrower here; a gradient penalty on random interpolates between real and
# generated samples with lambda 0.1, the reference's value for its toy tasks; five critic updates per generator
# update; Adam with betas (0.5, 0.9)). Critic and generator each have their own
# optimizer; the generator's loss is marked at every fifth step only. The error is a sliced Wasserstein distance
# between a batch of samples and the real dev batch.
import math

import numpy as np
import torch
from torch import nn

NOISE_DIM, N_CRITIC, LAMBDA = 2, 5, 0.1


def eight_gaussians(num, seed):
    rng = np.random.default_rng(seed)
    angles = 2 * math.pi * rng.integers(0, 8, num) / 8
    points = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1) + 0.02 * rng.standard_normal((num, 2))
    return (points / 1.414).astype(np.float32)


train = {"class": "NumpyDataset", "arrays": {"data": eight_gaussians(25600, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": eight_gaussians(2048, seed=2)}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 128
num_epochs = 15
learning_rate = 5e-4
optimizers = {
    "critic": {"class": "adam", "params": "critic.*", "betas": (0.5, 0.9)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.9)},
}
ANGLES = torch.arange(32) * math.pi / 32
DIRECTIONS = torch.stack([ANGLES.cos(), ANGLES.sin()])


class WGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128),
            nn.ReLU(),
            nn.Linear(128, 128),
            nn.ReLU(),
            nn.Linear(128, 128),
            nn.ReLU(),
            nn.Linear(128, 2),
        )
        self.critic = nn.Sequential(
            nn.Linear(2, 128),
            nn.ReLU(),
            nn.Linear(128, 128),
            nn.ReLU(),
            nn.Linear(128, 128),
            nn.ReLU(),
            nn.Linear(128, 1),
        )

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return WGAN()


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(len(real), 1, device=real.device)
    mixed = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
    (gradients,) = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    real_score, fake_score = model.critic(real).mean(), model.critic(fake).mean()
    critic_loss = fake_score - real_score
    if run_ctx.train_flag:
        critic_loss = critic_loss + LAMBDA * gradient_penalty(model.critic, real, fake)
    run_ctx.mark_as_loss(critic_loss, "critic", optimizer="critic")
    if not run_ctx.train_flag or run_ctx.step % N_CRITIC == N_CRITIC - 1:
        run_ctx.mark_as_loss(-fake_score, "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
