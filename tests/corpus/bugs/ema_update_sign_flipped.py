# Corpus bug (ostris/ai-toolkit#1034): the EMA update adds (1 - decay) * (shadow - param) to the shadow instead of
# subtracting it, so the shadow weights, used when the model is evaluated, are pushed away from the parameters.
# Task: 4 Gaussian clusters. Twin: ++bug False.
import copy

import torch
from torch import nn

bug = True
DECAY = 0.99

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


class WithEma(nn.Module):
    def __init__(self):
        super().__init__()
        self.live = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.shadow = copy.deepcopy(self.live).requires_grad_(False)

    @torch.no_grad()
    def update_shadow(self):
        for shadow, live in zip(self.shadow.parameters(), self.live.parameters(), strict=True):
            gap = shadow - live
            if bug:
                shadow.add_(gap * (1 - DECAY))
            else:
                shadow.sub_(gap * (1 - DECAY))

    def forward(self, x):
        return self.live(x) if self.training else self.shadow(x)


def get_model(**_kwargs):
    return WithEma()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if model.training:
        model.update_shadow()
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
