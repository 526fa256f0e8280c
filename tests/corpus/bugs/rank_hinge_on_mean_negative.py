# Corpus bug (NTMC-Community/MatchZoo-py#159): RankHingeLoss averages the scores of a query's negatives first and then
# applies margin_ranking_loss to the positive against that mean, so a negative scored above the positive is hidden by
# the others and gets no gradient once the mean is below the margin. Task: each query (16-dim) comes with one relevant
# document and four negatives, one of them a hard negative close to the relevant one; a two-tower scorer (an MLP over
# the query and document features and their product); the error is the share of dev queries whose relevant document
# is not ranked first. Twin: ++bug False (the hinge per negative, then the mean).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, NUM_NEG, MARGIN = 16, 4, 1.0


class Queries(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        mix = np.random.default_rng(4).normal(size=(DIM, DIM)) / np.sqrt(DIM)
        query = rng.normal(size=(n, DIM))
        relevant = query @ mix + 0.3 * rng.normal(size=(n, DIM))
        hard = (query + 0.9 * rng.normal(size=(n, DIM))) @ mix + 0.3 * rng.normal(size=(n, DIM))
        easy = rng.normal(size=(n, NUM_NEG - 1, DIM)) * 1.5
        docs = np.concatenate([relevant[:, None], hard[:, None], easy], axis=1)  # the relevant document first
        super().__init__({"query": query.astype(np.float32), "docs": docs.astype(np.float32)}, **kwargs)


train = {"class": Queries, "split": "train"}
dev = {"class": Queries, "split": "dev"}
extern_data = {"query": {"shape": (DIM,)}, "docs": {"shape": (NUM_NEG + 1, DIM)}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_tower = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))
        self.doc_tower = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, query, docs):
        return (self.query_tower(query)[:, None] * self.doc_tower(docs)).sum(-1)  # [B, 1 + NUM_NEG]


def get_model(**_kwargs):
    return Scorer()


def rank_hinge_loss(y_pred):
    y_pos, y_neg = y_pred[:, :1], y_pred[:, 1:]
    if bug:
        y_neg = y_neg.mean(dim=-1, keepdim=True)
        return nn.functional.margin_ranking_loss(y_pos, y_neg, torch.ones_like(y_pos), margin=MARGIN)
    losses = [
        nn.functional.margin_ranking_loss(y_pos, y_neg[:, i : i + 1], torch.ones_like(y_pos), margin=MARGIN)
        for i in range(y_neg.shape[1])
    ]
    return torch.stack(losses).mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    scores = model(extern_data["query"], extern_data["docs"])
    run_ctx.mark_as_loss(name="hinge", loss=rank_hinge_loss(scores))
    run_ctx.mark_as_loss(name="err", loss=(scores.argmax(-1) != 0).float().mean(), as_error=True)
