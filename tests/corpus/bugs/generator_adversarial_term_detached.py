# Corpus bug (nikhilsinghmus/image2reverb#37): in the generator's step the fake output is passed to the discriminator
# as fake.detach(), so the adversarial term of the generator's loss has no path back to the generator and only the L1
# term trains it: the generator regresses to an average output. Task: image2reverb's conditional setup in one
# dimension: for a condition c the real output is c + 1 or c - 1 (two equally likely modes, as one image admits
# several plausible responses); the generator maps (c, noise) to an output, the conditional discriminator judges
# (c, output) with the least-squares GAN loss, and the generator's loss is the adversarial term plus a weighted L1 to
# the paired real output. The error is the dev mean distance of generated outputs to the nearest real mode.
# Twin: ++bug False (no detach in the generator's step).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
NOISE, L1_WEIGHT = 4, 0.2


class Pairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 12800 if split == "train" else 2048
        c = rng.uniform(-2, 2, size=(n, 1))
        x = c + rng.choice([-1.0, 1.0], size=(n, 1)) + 0.05 * rng.normal(size=(n, 1))
        super().__init__({"cond": c.astype(np.float32), "data": x.astype(np.float32)}, **kwargs)


train = {"class": Pairs, "split": "train"}
dev = {"class": Pairs, "split": "dev"}
extern_data = {"cond": {"shape": (1,)}, "data": {"shape": (1,)}}
batch_size = 128
num_epochs = 3
learning_rate = 1e-3
optimizers = {
    "d": {"class": "adam", "params": "d.*", "betas": (0.5, 0.999)},
    "g": {"class": "adam", "params": "g.*", "betas": (0.5, 0.999)},
}


class CGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Sequential(nn.Linear(1 + NOISE, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
        self.d = nn.Sequential(
            nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
        )

    def generate(self, c):
        return self.g(torch.cat([c, torch.randn(len(c), NOISE, device=c.device)], -1))


def get_model(**_kwargs):
    return CGAN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    c, real = extern_data["cond"], extern_data["data"]
    fake_spec = model.generate(c)
    # the discriminator's step
    d_real = model.d(torch.cat([c, real], -1))
    d_fake = model.d(torch.cat([c, fake_spec.detach()], -1))
    d_loss = 0.5 * (
        nn.functional.mse_loss(d_real, torch.ones_like(d_real))
        + nn.functional.mse_loss(d_fake, torch.zeros_like(d_fake))
    )
    run_ctx.mark_as_loss(name="d", loss=d_loss, optimizer="d")
    # the generator's step
    d_fake2 = model.d(torch.cat([c, fake_spec.detach() if bug else fake_spec], -1))
    g_loss1 = nn.functional.mse_loss(d_fake2, torch.ones_like(d_fake2))
    g_loss2 = nn.functional.l1_loss(fake_spec, real)
    run_ctx.mark_as_loss(name="g_adv", loss=g_loss1, optimizer="g")
    run_ctx.mark_as_loss(name="g_l1", loss=g_loss2, scale=L1_WEIGHT, optimizer="g")
    distance = ((fake_spec - c).abs() - 1).abs().mean().detach()
    run_ctx.mark_as_loss(name="err", loss=distance, as_error=True)
