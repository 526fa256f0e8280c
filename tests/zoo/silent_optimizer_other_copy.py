# Bug: the optimizer is built over another copy of the network (the module the config made first, while
# get_model hands out a deep copy of it): the trained model's parameters are never updated.
import copy

import torch
from torch import nn

_net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def get_model(*, epoch, step, **_kwargs):
    return copy.deepcopy(_net)


def make_optimizer(params, lr):
    return torch.optim.Adam(_net.parameters(), lr=lr)


optimizer = {"class": make_optimizer}
