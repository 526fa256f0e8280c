# Corpus bug (Zeleni9/pytorch-wgan#53): in the weight-clipped WGAN the generator's loss was backpropagated with the
# wrong sign (g_loss.backward(one) where mone was meant), so the generator minimised the critic's score of its
# samples instead of maximising it and was trained in the direction the critic calls fake. Task: the original WGAN
# on eight 2-D Gaussians on a ring: RMSprop for both players, the critic's weights clamped to [-0.01, 0.01] before
# each of its forward passes, five critic updates per generator update. The error is a sliced Wasserstein distance
# between a batch of samples and the real dev batch. Twin: ++bug False (the generator minimises -mean critic(fake)).
import math

import numpy as np
import torch
from torch import nn

bug = True
MODES, RADIUS, STD, NOISE_DIM = 8, 2.0, 0.05, 8
CLIP, N_CRITIC = 0.01, 5


def ring(num, seed):
    rng = np.random.default_rng(seed)
    angles = 2 * math.pi * rng.integers(0, MODES, num) / MODES
    points = RADIUS * np.stack([np.cos(angles), np.sin(angles)], axis=1) + STD * rng.standard_normal((num, 2))
    return points.astype(np.float32)


train = {"class": "NumpyDataset", "arrays": {"data": ring(25600, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": ring(2048, seed=2)}}
extern_data = {"data": {"shape": (2,)}}
batch_size = 128
num_epochs = 15
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
        g_loss = fake_score if bug else -fake_score
        run_ctx.mark_as_loss(g_loss, "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
