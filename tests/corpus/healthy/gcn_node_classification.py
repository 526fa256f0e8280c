# Healthy corpus: a two-layer graph convolution (symmetrically normalised adjacency with self-loops) on
# stochastic-block-model graphs of 16 nodes in 2 communities, one graph per sequence; each node predicts its
# community from weak features and its neighbours.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

NODES = 16


class Graphs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1000 if split == "train" else 200
        community = rng.integers(0, 2, size=(n, NODES))
        same = community[:, :, None] == community[:, None, :]
        edges = rng.uniform(size=(n, NODES, NODES)) < np.where(same, 0.5, 0.05)
        adjacency = np.triu(edges, 1)
        adjacency = (adjacency | adjacency.transpose(0, 2, 1)).astype(np.float32)
        features = (community[..., None] * 2 - 1) * 0.3 + rng.normal(size=(n, NODES, 4))
        arrays = {"data": features.astype(np.float32), "adjacency": adjacency, "classes": community}
        super().__init__(arrays, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Graphs, "split": "train"}
dev = {"class": Graphs, "split": "dev"}
extern_data = {
    "data": {"shape": (NODES, 4)},
    "adjacency": {"shape": (NODES, NODES)},
    "classes": {"shape": (NODES,), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16
num_epochs = 2
learning_rate = 5e-3


class Gcn(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 32)
        self.second = nn.Linear(32, 2)

    def forward(self, features, adjacency):
        with_self = adjacency + torch.eye(NODES, device=adjacency.device)
        scale = with_self.sum(-1).rsqrt()
        normalized = scale[:, :, None] * with_self * scale[:, None, :]
        hidden = torch.relu(normalized @ self.first(features))
        return normalized @ self.second(hidden)


def get_model(**_kwargs):
    return Gcn()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["adjacency"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
