# Zoo bug, over classify.py (after msight-tech/research-ms-loss#27, written anew): the optimizer's builder tags the
# first layer's param group with 'lr_mult' 0.1, mmcv's spelling; torch.optim.SGD does not read the key and nothing
# else does, so that layer trains at the full rate. ++decay_split True splits each group into weight decay and no
# decay (biases), as layer-wise decay builders do: still the bug. Healthy variants: ++applied True (the builder
# computes the group's own 'lr' from the factor, the key stays in the group) and ++own_class True (an SGD of the
# config's own that applies the key in its step).
import torch

applied = False
decay_split = False
own_class = False


class ScaledSGD(torch.optim.SGD):
    """SGD whose step scales each group's rate by its 'lr_mult' (and puts the rate back)."""

    @torch.no_grad()
    def step(self, closure=None):
        rates = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            group["lr"] = group["lr"] * group["lr_mult"]
        try:
            return super().step(closure)
        finally:
            for group, rate in zip(self.param_groups, rates, strict=True):
                group["lr"] = rate


def build_optimizer(params, lr, **kwargs):
    params = list(params)
    first, rest = params[:2], params[2:]  # the first Linear's weight and bias
    groups = [{"params": first, "lr_mult": 0.1}, {"params": rest, "lr_mult": 1.0}]
    if decay_split:
        groups = [
            {"params": [p for p in g["params"] if p.ndim == ndim], "lr_mult": g["lr_mult"], "weight_decay": decay}
            for g in groups
            for ndim, decay in ((2, 1e-4), (1, 0.0))
        ]
    if applied:
        for group in groups:
            group["lr"] = lr * group["lr_mult"]
    return (ScaledSGD if own_class else torch.optim.SGD)(groups, lr=lr, **kwargs)


optimizer = {"class": build_optimizer, "momentum": 0.9}
