# Corpus bug (georg-wolflein/good-features#1): an attention-MIL pooling masks the padded instances of a bag by
# multiplying their scores by the 0/1 mask before the softmax, so padding gets score 0, not -inf, and still takes
# attention weight: the pooled vector depends on how much padding the bag has. Task: each bag (1 to 4 or 60 to 100
# instances, padded in batches) holds one marked "tumour" instance among normal ones; the label is the sign of that
# instance's second feature. Twin: ++bug False (the padded scores are filled with -inf before the softmax).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Bags(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 400
        sizes = np.where(rng.random(n) < 0.5, rng.integers(1, 5, size=n), rng.integers(60, 101, size=n))
        x = [rng.normal(size=(size, 4)).astype(np.float32) for size in sizes]
        tumour = [rng.integers(size) for size in sizes]
        for bag, i in zip(x, tumour, strict=True):
            bag[:, 0] = -1.0
            bag[i, 0] = 1.0
        y = np.array([int(bag[i, 1] > 0) for bag, i in zip(x, tumour, strict=True)])
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Bags, "split": "train"}
dev = {"class": Bags, "split": "dev"}
extern_data = {"data": {"shape": (None, 4)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 3200
max_seqs = 32
num_epochs = 3
learning_rate = 0.05
optimizer = {"class": "sgd", "momentum": 0.9}


class GatedAttentionMIL(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, dim), nn.ReLU())
        self.attention_v = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.attention_u = nn.Sequential(nn.Linear(dim, dim), nn.Sigmoid())
        self.attention_w = nn.Linear(dim, 1)
        self.classifier = nn.Linear(dim, 2)

    def forward(self, bags, sizes):
        h = self.encoder(bags)  # [B, N, dim]
        scores = self.attention_w(self.attention_v(h) * self.attention_u(h)).squeeze(-1)  # [B, N]
        mask = torch.arange(bags.shape[1], device=bags.device)[None, :] < sizes.to(bags.device)[:, None]
        if bug:
            scores = scores * mask
        else:
            scores = scores.masked_fill(~mask, -torch.inf)
        weights = torch.softmax(scores, dim=-1)
        return self.classifier((weights[..., None] * h).sum(1))


def get_model(**_kwargs):
    return GatedAttentionMIL()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
