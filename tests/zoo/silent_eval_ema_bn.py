# Bug: an EMA copy of the network for evaluation, updated parameter by parameter: the batch-norm
# running statistics of the copy stay at their initial values.
import copy

import torch
from torch import nn
from torch.nn import functional as F


class WithEma(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    @torch.no_grad()
    def update_ema(self, decay=0.9):
        for e, p in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            e.mul_(decay).add_(p, alpha=1 - decay)

    def forward(self, x):
        return self.net(x) if self.training else self.ema(x)


def get_model(*, epoch, step, **_kwargs):
    return WithEma()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if run_ctx.train_flag:
        model.update_ema()
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=F.cross_entropy(logits, extern_data["classes"]))
