# Bug: the output layer's parameters are added to the parameter list a second time (meant: a group of its
# own): SGD moves them twice per update.
import torch


def make_optimizer(params, lr):
    return torch.optim.SGD(params + params[-2:], lr=lr)


optimizer = {"class": make_optimizer}
