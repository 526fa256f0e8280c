# Healthy corpus (on healthy_vectors.py): a RealNVP-style normalising flow (affine couplings whose last layer starts
# at zero: the identity), trained on the negative log-likelihood per dimension.
import math

import torch
from torch import nn


class Coupling(nn.Module):
    def __init__(self, flip):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 16))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        a, b = x.chunk(2, -1)
        if self.flip:
            a, b = b, a
        s, t = self.net(a).chunk(2, -1)
        s = torch.tanh(s)
        b = b * s.exp() + t
        out = torch.cat([b, a] if self.flip else [a, b], -1)
        return out, s.sum(-1)


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Coupling(i % 2 == 1) for i in range(4)])

    def forward(self, x):
        logdet = 0
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        return x, logdet


def get_model(**_):
    return Flow()


def train_step(*, model, extern_data, run_ctx, **_):
    z, logdet = model(extern_data["data"])
    log_prob = -0.5 * (z**2).sum(-1) - 8 * math.log(2 * math.pi) + logdet
    run_ctx.mark_as_loss(name="nll", loss=-(log_prob.mean()) / 16)
