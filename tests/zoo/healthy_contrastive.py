# Healthy corpus: CLIP-style contrastive learning with in-batch negatives: two encoders embed two views of the
# same item, the logits are the scaled cosine similarities of every pair in the batch, and the loss is the
# symmetric cross-entropy against the diagonal. Each example's loss depends on the others by design.
import math

import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_items = _rng.normal(size=(2000, 8)).astype(np.float32)
_mix_a, _mix_b = _rng.normal(size=(8, 16)), _rng.normal(size=(8, 12))
_a = (_items @ _mix_a + 0.1 * _rng.normal(size=(2000, 16))).astype(np.float32)
_b = (_items @ _mix_b + 0.1 * _rng.normal(size=(2000, 12))).astype(np.float32)
train = {"class": "NumpyDataset", "arrays": {"data": _a[:1600], "other": _b[:1600]}}
dev = {"class": "NumpyDataset", "arrays": {"data": _a[1600:], "other": _b[1600:]}}
extern_data = {"data": {"shape": (16,)}, "other": {"shape": (12,)}}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.1}
learning_rate = 1e-3


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
        self.text = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 32))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, a, b):
        a = nn.functional.normalize(self.image(a), dim=-1)
        b = nn.functional.normalize(self.text(b), dim=-1)
        return self.logit_scale.exp() * a @ b.t()


def get_model(**_kwargs):
    return Clip()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["other"])
    labels = torch.arange(logits.shape[0], device=logits.device)
    loss = (nn.functional.cross_entropy(logits, labels) + nn.functional.cross_entropy(logits.t(), labels)) / 2
    run_ctx.mark_as_loss(name="clip", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != labels).float().mean(), as_error=True)
