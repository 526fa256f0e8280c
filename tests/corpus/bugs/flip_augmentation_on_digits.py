# Corpus bug (chrischute/real-nvp#5): a RealNVP density model is trained on MNIST with the random horizontal flips
# of its CIFAR-10 pipeline; digits are not mirror-symmetric, so half of what it learns from are mirrored digits that
# never occur, and its samples come out mirrored. Task: the packaged MNIST digits, downscaled to 14x14, dequantised
# and logit-transformed as in RealNVP; a flow of 6 affine couplings (checkerboard masks, alternating) with MLP
# scale/shift networks; the error is the dev negative log-likelihood in bits per pixel. Twin: ++bug False (no flips).
import math

import numpy as np
import torch
from torch import nn

from framework.datasets.mnist import MnistDataset

bug = True
SIDE, ALPHA = 14, 0.05
PIXELS = SIDE * SIDE


class Digits14(MnistDataset):
    def __init__(self, split, **kwargs):
        super().__init__(split, normalize=False, **kwargs)
        images = self.arrays["data"].reshape(-1, 28, 28)
        small = images.reshape(-1, SIDE, 2, SIDE, 2).mean((2, 4))  # 0..255, 2x2 means
        self.arrays["data"] = np.floor(small).reshape(-1, PIXELS).astype(np.float32)


train = {"class": Digits14, "split": "train"}
dev = {"class": Digits14, "split": "test"}
extern_data = {"data": {"shape": (PIXELS,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 8
learning_rate = 3e-4
CHECKER = torch.tensor((np.add.outer(np.arange(SIDE), np.arange(SIDE)) % 2).reshape(-1), dtype=torch.bool)


class Coupling(nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(
            nn.Linear(PIXELS, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2 * PIXELS)
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        keep = x * self.mask
        log_scale, shift = self.net(keep).chunk(2, -1)
        log_scale = torch.tanh(log_scale) * ~self.mask
        shift = shift * ~self.mask
        return keep + (x * log_scale.exp() + shift) * ~self.mask, log_scale.sum(-1)


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.couplings = nn.ModuleList([Coupling(CHECKER if i % 2 == 0 else ~CHECKER) for i in range(6)])

    def log_prob(self, x):
        log_det = torch.zeros(x.shape[0], device=x.device)
        for coupling in self.couplings:
            x, step = coupling(x)
            log_det = log_det + step
        return -0.5 * (x**2).sum(-1) - 0.5 * PIXELS * math.log(2 * math.pi) + log_det


def get_model(**_kwargs):
    return Flow()


def preprocess(pixels):
    """Dequantise 0..255 to (0, 1), squeeze into [ALPHA, 1 - ALPHA], logit; returns y and log|dy/dx| per image."""
    x = (pixels + torch.rand_like(pixels)) / 256.0
    p = ALPHA + (1 - 2 * ALPHA) * x
    y = torch.log(p) - torch.log1p(-p)
    log_det = (math.log(1 - 2 * ALPHA) - torch.log(p) - torch.log1p(-p)).sum(-1)
    return y, log_det


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    pixels = extern_data["data"]
    if bug and run_ctx.train_flag:  # RandomHorizontalFlip, as for CIFAR-10
        flip = torch.rand(len(pixels), device=pixels.device) < 0.5
        mirrored = pixels.view(-1, SIDE, SIDE).flip(-1).reshape(-1, PIXELS)
        pixels = torch.where(flip[:, None], mirrored, pixels)
    y, log_det = preprocess(pixels)
    log_px = model.log_prob(y) + log_det - PIXELS * math.log(256.0)  # the density of the 0..255 pixel values
    bits = -log_px / (PIXELS * math.log(2.0))
    run_ctx.mark_as_loss(name="nll", loss=bits.mean())
    run_ctx.mark_as_loss(name="err", loss=bits.mean().detach(), as_error=True)
