# Corpus bug (dmlc/dgl#2198): the citation graph ogbn-arxiv stores each edge once, from the citing to the cited paper;
# trained without the reverse edges, message passing carries information along one direction only, so a paper never
# hears from the papers it cites, and node classification was very poor whatever the architecture. Task: graphs of
# 40 papers in 4 topics, each paper citing 3 earlier papers (80% of the same topic); a paper's own features show its
# topic only weakly, so it needs its neighbours. Model: two graph convolutions with the mean over a node's incoming
# messages and itself; one graph is one sequence. Twin: ++bug False (the reverse edges are added: bidirected graph).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
NODES, TOPICS, DIM, CITES = 40, 4, 16, 3
TOPIC_MEANS = np.random.default_rng(7).normal(size=(TOPICS, DIM))


def citation_graph(rng):
    topics = rng.integers(0, TOPICS, size=NODES)
    edges = np.zeros((NODES, NODES), dtype=np.float32)  # edges[src, dst] = 1: src cites dst
    for i in range(1, NODES):
        same = np.flatnonzero(topics[:i] == topics[i])
        for _ in range(CITES):
            pool = same if (len(same) and rng.random() < 0.8) else np.arange(i)
            edges[i, rng.choice(pool)] = 1.0
    x = 0.45 * TOPIC_MEANS[topics] + rng.normal(size=(NODES, DIM))
    return x.astype(np.float32), edges, topics


def adjacency(edges):
    """Row i lists the nodes whose messages node i receives (the sources of edges into i)."""
    incoming = edges.T
    if not bug:  # read at call time: ++bug False applies after the file ran
        incoming = np.maximum(incoming, edges)  # add the reverse edges
    return incoming


class Citations(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        graphs = [citation_graph(rng) for _ in range(300 if split == "train" else 80)]
        arrays = {
            "data": np.stack([g[0] for g in graphs]),
            "adjacency": np.stack([adjacency(g[1]) for g in graphs]),
            "classes": np.stack([g[2] for g in graphs]),
        }
        super().__init__(arrays, sparse_dims={"classes": TOPICS}, **kwargs)


train = {"class": Citations, "split": "train"}
dev = {"class": Citations, "split": "dev"}
extern_data = {
    "data": {"shape": (NODES, DIM)},
    "adjacency": {"shape": (NODES, NODES)},
    "classes": {"shape": (NODES,), "dtype": "int64", "sparse_dim": TOPICS},
}
batch_size = 16
num_epochs = 5
learning_rate = 3e-3


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(DIM, 64)
        self.layer2 = nn.Linear(64, 64)
        self.out = nn.Linear(64, TOPICS)

    @staticmethod
    def propagate(h, adjacency):
        a = adjacency + torch.eye(NODES, device=h.device)
        return (a @ h) / a.sum(-1, keepdim=True)

    def forward(self, x, adjacency):
        h = torch.relu(self.layer1(self.propagate(x, adjacency)))
        h = torch.relu(self.layer2(self.propagate(h, adjacency)))
        return self.out(h)


def get_model(**_kwargs):
    return GCN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["adjacency"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
