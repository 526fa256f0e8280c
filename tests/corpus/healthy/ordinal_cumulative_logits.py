# Healthy corpus: ordinal regression with cumulative logits (a neural proportional-odds model). Five ordered grades are
# predicted from one score per example and four thresholds kept in order by construction (the first one plus a
# cumulative sum of softplus increments); each threshold k has a binary loss for "grade > k". The predicted grade is the
# number of thresholds the score exceeds; the error is the wrong-grade rate.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

GRADES = 5
DIRECTION = np.random.default_rng(9).normal(size=8)
CUTS = np.array([-0.85, -0.25, 0.25, 0.85])  # about one fifth of the examples per grade


class Graded(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8))
        latent = x @ DIRECTION / np.linalg.norm(DIRECTION) + 0.1 * rng.normal(size=len(x))
        grade = np.searchsorted(CUTS, latent)
        super().__init__({"data": x.astype(np.float32), "grade": grade}, sparse_dims={"grade": GRADES}, **kwargs)


train = {"class": Graded, "split": "train"}
dev = {"class": Graded, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "grade": {"shape": (), "dtype": "int64", "sparse_dim": GRADES}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-2


class CumulativeLogits(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
        self.first_threshold = nn.Parameter(torch.tensor([-1.0]))
        self.increments = nn.Parameter(torch.zeros(GRADES - 2))

    def thresholds(self):
        return torch.cat(
            [self.first_threshold, self.first_threshold + nn.functional.softplus(self.increments).cumsum(0)]
        )

    def forward(self, x):
        return self.score(x) - self.thresholds()  # [batch, GRADES - 1]: the logit of "grade > k"


def get_model(**_kwargs):
    return CumulativeLogits()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    grade = extern_data["grade"]
    above = (grade[:, None] > torch.arange(GRADES - 1, device=grade.device)).float()
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, above))
    predicted = (logits > 0).sum(-1)
    run_ctx.mark_as_loss(name="err", loss=(predicted != grade).float().mean(), as_error=True)
