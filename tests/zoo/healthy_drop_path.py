# Healthy corpus (on healthy_vectors.py): timm's DropPath (per-sample stochastic depth) written as timm writes
# it, in pre-norm residual blocks with LayerScale.
import torch
from torch import nn


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    return x * random_tensor / keep_prob


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Block(nn.Module):
    def __init__(self, drop):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        self.gamma = nn.Parameter(1e-1 * torch.ones(32))
        self.drop_path = DropPath(drop)

    def forward(self, x):
        return x + self.drop_path(self.gamma * self.mlp(self.norm(x)))


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 32), *[Block(0.1 * i) for i in range(4)], nn.LayerNorm(32), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
