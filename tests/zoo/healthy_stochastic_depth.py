# Healthy corpus (on healthy_vectors.py): a deep residual MLP with stochastic depth as Huang et al. write it,
# torchvision.ops.stochastic_depth(mode="batch") (its code, torchvision is not installed here): in training a
# whole residual branch is dropped for the batch, with a drop probability rising linearly with depth. A step
# may skip any branch.
import torch
from torch import nn


def stochastic_depth(input, p, mode, training=True):
    if not training or p == 0.0:
        return input
    survival_rate = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device)
    noise = noise.bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class StochasticDepth(nn.Module):
    def __init__(self, p, mode):
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, input):
        return stochastic_depth(input, self.p, self.mode, self.training)


class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.branch = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 32))
        self.drop = StochasticDepth(p, mode="batch")

    def forward(self, x):
        return x + self.drop(self.branch(x))


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 32), *[Block(0.5 * (i + 1) / 6) for i in range(6)], nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
