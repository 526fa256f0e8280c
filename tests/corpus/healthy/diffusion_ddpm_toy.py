# Healthy corpus: DDPM-style noise prediction on 2-D points from 4 Gaussian blobs. An MLP conditioned on the timestep
# regresses the noise added at a random step; the loss stays far from 0 by design (the noise is unpredictable at
# large t), and dev draws its own noise, as a DDPM's validation loss does.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

STEPS = 100
BETAS = torch.linspace(1e-4, 0.05, STEPS)
ALPHA_BARS = torch.cumprod(1 - BETAS, 0)


class Blobs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        centers = np.array([[2, 2], [-2, 2], [2, -2], [-2, -2]], dtype=np.float32)
        x = centers[rng.integers(0, 4, n)] + 0.3 * rng.normal(size=(n, 2)).astype(np.float32)
        super().__init__({"data": x.astype(np.float32)}, **kwargs)


train = {"class": Blobs, "split": "train"}
dev = {"class": Blobs, "split": "dev"}
extern_data = {"data": {"shape": (2,)}}
batch_size = 64
num_epochs = 2
learning_rate = 2e-3


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 2))

    def forward(self, noisy, t):
        return self.net(torch.cat([noisy, (t.float() / STEPS)[:, None]], -1))


def get_model(**_kwargs):
    return Denoiser()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    clean = extern_data["data"]
    t = torch.randint(0, STEPS, (clean.shape[0],), device=clean.device)
    noise = torch.randn_like(clean)
    alpha_bar = ALPHA_BARS.to(clean.device)[t][:, None]
    noisy = alpha_bar.sqrt() * clean + (1 - alpha_bar).sqrt() * noise
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(model(noisy, t), noise))
