# Corpus bug (batra-mlp-lab/visdial-challenge-starter-pytorch#1): answer scores [batch, options] are normalised with a
# softmax over dimension 0 (the batch) instead of the options. Task: pick which of 5 candidate vectors matches the
# query under a hidden linear map. Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
OPTIONS = 5


class Choices(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        hidden_map = np.random.default_rng(4).normal(size=(8, 8)) / np.sqrt(8)
        query = rng.normal(size=(n, 8))
        options = rng.normal(size=(n, OPTIONS, 8))
        answer = rng.integers(0, OPTIONS, n)
        options[np.arange(n), answer] = query @ hidden_map + 0.3 * rng.normal(size=(n, 8))
        arrays = {"query": query.astype(np.float32), "options": options.astype(np.float32), "classes": answer}
        super().__init__(arrays, sparse_dims={"classes": OPTIONS}, **kwargs)


train = {"class": Choices, "split": "train"}
dev = {"class": Choices, "split": "dev"}
extern_data = {
    "query": {"shape": (8,)},
    "options": {"shape": (OPTIONS, 8)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": OPTIONS},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.project = nn.Linear(8, 8)

    def forward(self, query, options):
        scores = (options * self.project(query)[:, None, :]).sum(-1)
        return torch.log_softmax(scores, dim=0 if bug else 1)


def get_model(**_kwargs):
    return Scorer()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    log_probs = model(extern_data["query"], extern_data["options"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="nll", loss=nn.functional.nll_loss(log_probs, targets))
    run_ctx.mark_as_loss(name="err", loss=(log_probs.argmax(-1) != targets).float().mean(), as_error=True)
