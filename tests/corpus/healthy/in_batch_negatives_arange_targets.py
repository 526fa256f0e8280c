# Healthy corpus: two-tower retrieval trained with in-batch negatives. A query encoder and a document encoder map to
# a shared space; the loss is cross-entropy over the B x B similarity matrix of a batch with targets torch.arange(B)
# (each query's own document is the positive, the other documents of the batch its negatives), as CLIP and DPR do.
# The error is the dev share of queries whose own document is not the most similar one within their dev batch.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, TOPICS = 24, 64
TOPIC_VECTORS = np.random.default_rng(6).normal(size=(TOPICS, DIM))


class Pairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 640
        topics = rng.integers(0, TOPICS, size=n)
        latent = TOPIC_VECTORS[topics] + 0.5 * rng.normal(size=(n, DIM))
        mix_q, mix_d = (np.random.default_rng(seed).normal(size=(DIM, DIM)) / np.sqrt(DIM) for seed in (7, 8))
        query = latent @ mix_q + 0.2 * rng.normal(size=(n, DIM))
        document = latent @ mix_d + 0.2 * rng.normal(size=(n, DIM))
        super().__init__({"query": query.astype(np.float32), "document": document.astype(np.float32)}, **kwargs)


train = {"class": Pairs, "split": "train"}
dev = {"class": Pairs, "split": "dev"}
extern_data = {"query": {"shape": (DIM,)}, "document": {"shape": (DIM,)}}
batch_size = 64
num_epochs = 4
learning_rate = 2e-3
TEMPERATURE = 0.1


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_encoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))
        self.document_encoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))


def get_model(**_kwargs):
    return TwoTower()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    q = nn.functional.normalize(model.query_encoder(extern_data["query"]), dim=-1)
    d = nn.functional.normalize(model.document_encoder(extern_data["document"]), dim=-1)
    scores = q @ d.T / TEMPERATURE
    labels = torch.arange(len(q), device=q.device)  # row i's positive is column i
    run_ctx.mark_as_loss(name="infonce", loss=nn.functional.cross_entropy(scores, labels))
    run_ctx.mark_as_loss(name="err", loss=(scores.argmax(-1) != labels).float().mean(), as_error=True)
