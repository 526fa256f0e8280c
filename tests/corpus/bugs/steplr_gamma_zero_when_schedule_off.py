# Corpus bug (LINCellularNeuroscience/VAME#26): with the scheduler option switched off, the training script still
# builds StepLR(optimizer, step_size, gamma=0) instead of gamma=1, so at the first step boundary the learning rate is
# multiplied by 0 and the rest of training makes no update. Task: a GRU sequence autoencoder (VAME's recurrent
# encoder and decoder, without the variational part) reconstructing 4-dim trajectories of 30 frames (sums of
# sinusoids with random phases); the error is the dev reconstruction mean squared error. 10 sub-epochs, the step
# schedule stepped after each, step_size 3. Twin: ++bug False (gamma=1 when the scheduler is off).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
optimizer_scheduler = False  # the config switch of the original script
FRAMES, DIM, LATENT = 30, 4, 8


class Trajectories(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        t = np.linspace(0, 2 * np.pi, FRAMES)[None, :, None]
        freq = rng.uniform(0.5, 2.0, size=(n, 1, DIM))
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1, DIM))
        x = np.sin(freq * t + phase) + 0.05 * rng.normal(size=(n, FRAMES, DIM))
        super().__init__({"data": list(x.astype(np.float32))}, **kwargs)


train = {"class": Trajectories, "split": "train", "partition_epoch": 2}
dev = {"class": Trajectories, "split": "dev"}
extern_data = {"data": {"shape": (None, DIM)}}
batch_size = 32 * FRAMES
max_seqs = 32
num_epochs = 10
learning_rate = 3e-3

# The scheduler keeps the factor on the base rate in a one-parameter optimizer of its own; the framework applies
# learning_rate * factor at every step (dynamic_learning_rate).
_factor = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
_schedule = {}


def _scheduler():
    if "scheduler" not in _schedule:  # built when first used, after ++bug was applied
        if optimizer_scheduler:
            _schedule["scheduler"] = torch.optim.lr_scheduler.StepLR(_factor, step_size=3, gamma=0.2, last_epoch=-1)
        else:
            gamma = 0 if bug else 1
            _schedule["scheduler"] = torch.optim.lr_scheduler.StepLR(_factor, step_size=3, gamma=gamma, last_epoch=-1)
    return _schedule["scheduler"]


def step_schedule(_state):
    _scheduler().step()


callbacks = {"epoch_end": step_schedule}


def dynamic_learning_rate(*, learning_rate, **_kwargs):
    return learning_rate * _factor.param_groups[0]["lr"]


class SeqAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRU(DIM, 64, batch_first=True, bidirectional=True)
        self.to_latent = nn.Linear(128, LATENT)
        self.decoder = nn.GRU(LATENT, 64, batch_first=True)
        self.out = nn.Linear(64, DIM)

    def forward(self, x):
        _, h = self.encoder(x)
        z = self.to_latent(torch.cat([h[0], h[1]], -1))
        decoded, _ = self.decoder(z[:, None].expand(-1, x.shape[1], -1))
        return self.out(decoded)


def get_model(**_kwargs):
    return SeqAutoencoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    reconstruction = model(x)
    mse = (reconstruction - x).pow(2).mean()
    run_ctx.mark_as_loss(name="mse", loss=mse)
    run_ctx.mark_as_loss(name="err", loss=mse.detach(), as_error=True)
