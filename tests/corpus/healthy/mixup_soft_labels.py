# Healthy corpus: mixup (Zhang et al.). In training, each batch is mixed with a permutation of itself: inputs and
# one-hot labels alike, with one weight lambda ~ Beta(alpha, alpha) per batch, and the loss is the cross-entropy
# against the soft targets. Evaluation sees clean inputs and hard labels; the error counts disagreements with the
# label that carries the larger weight.
import numpy as np
import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 8}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 8}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
MIXUP_ALPHA = 0.4


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    targets = nn.functional.one_hot(extern_data["classes"], 8).float()
    if run_ctx.train_flag:
        lam = float(np.random.beta(MIXUP_ALPHA, MIXUP_ALPHA))
        perm = torch.randperm(len(x), device=x.device)
        x = lam * x + (1 - lam) * x[perm]
        targets = lam * targets + (1 - lam) * targets[perm]
    logits = model(x)
    loss = -(targets * nn.functional.log_softmax(logits, -1)).sum(-1).mean()
    run_ctx.mark_as_loss(name="soft_ce", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets.argmax(-1)).float().mean(), as_error=True)
