# Zoo bug, over classify.py (after msight-tech/research-ms-loss#27, written anew): the optimizer's builder tags the
# first layer's param group with 'lr_mult' 0.1, mmcv's spelling; torch.optim.SGD does not read the key and nothing
# else does, so that layer trains at the full rate. ++applied True is the healthy variant: the builder computes the
# group's own 'lr' from the factor (the key stays in the group, applied).
import torch

applied = False


def build_optimizer(params, lr, **kwargs):
    params = list(params)
    first, rest = params[:2], params[2:]  # the first Linear's weight and bias
    groups = [{"params": first, "lr_mult": 0.1}, {"params": rest, "lr_mult": 1.0}]
    if applied:
        for group in groups:
            group["lr"] = lr * group["lr_mult"]
    return torch.optim.SGD(groups, lr=lr, **kwargs)


optimizer = {"class": build_optimizer, "momentum": 0.9}
