# Healthy corpus: the original WGAN, as in martinarjovsky/WassersteinGAN's main.py: RMSprop for both players, the
# critic's parameters clamped to [-0.01, 0.01] (here before each of its forward passes in training, which is where
# the reference clamps them: before the critic's update), five critic updates per generator update, the critic's
# loss mean D(fake) - mean D(real) and the generator's -mean D(fake). MLP critic (MLP_D-like) and generator; data: a
# 2-D "two moons" set. The error is a sliced Wasserstein distance between a batch of samples and the real dev batch.
import math

import numpy as np
import torch
from torch import nn

NOISE_DIM, CLIP, N_CRITIC = 4, 0.01, 5


def moons(num, seed):
    rng = np.random.default_rng(seed)
    upper = rng.random(num) < 0.5
    angle = math.pi * rng.random(num)
    x = np.where(upper, np.cos(angle), 1 - np.cos(angle))
    y = np.where(upper, np.sin(angle), 0.5 - np.sin(angle))
    return (np.stack([x - 0.5, y - 0.25], axis=1) + 0.05 * rng.standard_normal((num, 2))).astype(np.float32)


train = {"class": "NumpyDataset", "arrays": {"data": moons(25600, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": moons(2048, seed=2)}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 64
num_epochs = 8
learning_rate = 5e-4
optimizers = {
    "critic": {"class": "rmsprop", "params": "critic.*"},
    "generator": {"class": "rmsprop", "params": "generator.*"},
}
ANGLES = torch.arange(32) * math.pi / 32
DIRECTIONS = torch.stack([ANGLES.cos(), ANGLES.sin()])


class WGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)
        )
        self.critic = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return WGAN()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if run_ctx.train_flag:
        with torch.no_grad():
            for parameter in model.critic.parameters():
                parameter.clamp_(-CLIP, CLIP)
    real = extern_data["data"]
    fake = model.sample(len(real))
    real_score, fake_score = model.critic(real).mean(), model.critic(fake).mean()
    run_ctx.mark_as_loss(fake_score - real_score, "critic", optimizer="critic")
    if not run_ctx.train_flag or run_ctx.step % N_CRITIC == N_CRITIC - 1:
        run_ctx.mark_as_loss(-fake_score, "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
