# Bug: a learnable scale made with requires_grad=True instead of nn.Parameter: it gets gradients, but the
# model does not register it, so the optimizer never changes it.
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.scale = torch.ones(4, requires_grad=True)

    def forward(self, x):
        return self.body(x) * self.scale


def get_model(*, epoch, step, **_kwargs):
    return Scaled()
