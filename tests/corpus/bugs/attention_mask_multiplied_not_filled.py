# Corpus bug (georg-wolflein/good-features#1): an attention-MIL pooling masks the padded instances of a bag by
# multiplying their scores by the 0/1 mask before the softmax, so padding gets score 0, not -inf, and still takes
# attention weight: the pooled vector depends on how much padding the bag has. Task: regress a bag's mean instance
# score (bags of 2 to 40 instances, padded in batches); the error is the dev mean squared error (the target has unit
# variance). Twin: ++bug False (the padded scores are filled with -inf before the softmax).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Bags(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        sizes = np.minimum(2 + rng.geometric(1 / 8, size=1500 if split == "train" else 400), 80)
        x = [(2 + rng.normal(size=(n, 4))).astype(np.float32) for n in sizes]
        y = np.array([np.tanh(bag[:, 0] + bag[:, 1] - 4).mean() for bag in x])
        super().__init__({"data": x, "targets": (y / y.std()).astype(np.float32)}, **kwargs)


train = {"class": Bags, "split": "train"}
dev = {"class": Bags, "split": "dev"}
extern_data = {"data": {"shape": (None, 4)}, "targets": {"shape": (), "dtype": "float32"}}
batch_size = 800
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class GatedAttentionMIL(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, dim), nn.ReLU())
        self.attention_v = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.attention_u = nn.Sequential(nn.Linear(dim, dim), nn.Sigmoid())
        self.attention_w = nn.Linear(dim, 1)
        self.head = nn.Linear(dim, 1)

    def forward(self, bags, sizes):
        h = self.encoder(bags)  # [B, N, dim]
        scores = self.attention_w(self.attention_v(h) * self.attention_u(h)).squeeze(-1)  # [B, N]
        mask = torch.arange(bags.shape[1], device=bags.device)[None, :] < sizes.to(bags.device)[:, None]
        if bug:
            scores = scores * mask
        else:
            scores = scores.masked_fill(~mask, -torch.inf)
        weights = torch.softmax(scores, dim=-1)
        return self.head((weights[..., None] * h).sum(1)).squeeze(-1)


def get_model(**_kwargs):
    return GatedAttentionMIL()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"], extern_data["data:seq_len"])
    loss = nn.functional.mse_loss(prediction, extern_data["targets"])
    run_ctx.mark_as_loss(name="mse", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=loss.detach(), as_error=True)
