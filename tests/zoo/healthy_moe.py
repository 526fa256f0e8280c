# Healthy corpus (on healthy_vectors.py): a top-1 mixture of experts as the Switch Transformer writes it: a
# router picks one of 4 experts per input, the expert's output is scaled by the router probability, and a
# load-balancing loss (num_experts * sum(fraction routed * mean probability)) is added. In a step some experts
# may get no input at all.
import torch
from torch import nn


class SwitchFFN(nn.Module):
    def __init__(self, dim=32, experts=4):
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, dim)) for _ in range(experts)
        )
        self.aux_loss = None

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        gate, index = probs.max(-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            chosen = index == i
            if chosen.any():
                out[chosen] = expert(x[chosen]) * gate[chosen, None]
        fraction = nn.functional.one_hot(index, len(self.experts)).float().mean(0)
        self.aux_loss = len(self.experts) * (fraction * probs.mean(0)).sum()
        return x + out


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.moe = SwitchFFN()
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        return self.out(self.moe(self.inp(x)))


def get_model(**_kwargs):
    return Model()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="balance", loss=model.moe.aux_loss, scale=0.01)
