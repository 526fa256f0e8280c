# Corpus bug (queenie88/A-GCN#4): the adjacency built from node features by two learned projections is detached
# before the graph convolution, so the projections get no gradient and the graph stays as initialised. Task: each
# node of a 12-node graph predicts the sign of the summed signal over the nodes of its (noisily observed) group.
# Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
NODES, GROUPS = 12, 3


class Graphs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        groups = rng.integers(0, GROUPS, size=(n, NODES))
        signal = rng.normal(size=(n, NODES))
        same = groups[:, :, None] == groups[:, None, :]
        labels = ((same * signal[:, None, :]).sum(-1) > 0).astype(np.int64)
        features = np.concatenate(
            [np.eye(GROUPS)[groups] + 0.3 * rng.normal(size=(n, NODES, GROUPS)), signal[..., None]], axis=-1
        ).astype(np.float32)
        super().__init__({"data": features, "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Graphs, "split": "train"}
dev = {"class": Graphs, "split": "dev"}
extern_data = {
    "data": {"shape": (NODES, GROUPS + 1)},
    "classes": {"shape": (NODES,), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


class AdaptiveGraphConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.theta = nn.Linear(GROUPS + 1, 16)
        self.phi = nn.Linear(GROUPS + 1, 16)
        self.message = nn.Linear(GROUPS + 1, 32)
        self.out = nn.Sequential(nn.ReLU(), nn.Linear(32 + GROUPS + 1, 2))

    def forward(self, nodes):
        adjacency = (self.theta(nodes) @ self.phi(nodes).transpose(1, 2)).sigmoid()
        if bug:
            adjacency = adjacency.detach()
        aggregated = adjacency @ self.message(nodes)
        return self.out(torch.cat([aggregated, nodes], -1))


def get_model(**_kwargs):
    return AdaptiveGraphConv()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
