# Healthy corpus: Deep Sets (Zaheer et al. 2017): a per-point network, a sum over the points of a set and a network
# on the sum, so the prediction does not depend on the order of the points by construction. Each example is a set of
# 5 to 30 points in the plane (a padded sequence); the label says whether more of its points lie inside the unit
# circle than outside.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class PointSets(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        sets, labels = [], []
        for _ in range(n):
            size = int(rng.integers(5, 31))
            inside_share = rng.choice([0.25, 0.4, 0.6, 0.75])
            inside = rng.random(size) < inside_share
            radius = np.where(inside, rng.uniform(0.0, 0.95, size), rng.uniform(1.05, 2.0, size))
            angle = rng.uniform(0, 2 * np.pi, size)
            sets.append(np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1).astype(np.float32))
            labels.append(int(inside.sum() > size - inside.sum()))
        super().__init__({"data": sets, "classes": np.array(labels)}, sparse_dims={"classes": 2}, **kwargs)


class DeepSet(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.rho = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, points, lengths):
        real = torch.arange(points.shape[1], device=points.device)[None, :] < lengths[:, None]
        return self.rho((self.phi(points) * real[..., None]).sum(dim=1))


train = {"class": PointSets, "split": "train"}
dev = {"class": PointSets, "split": "dev"}
extern_data = {"data": {"shape": (None, 2)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 1000
max_seqs = 32
num_epochs = 5
learning_rate = 2e-3


def get_model(**_kwargs):
    return DeepSet()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    points = extern_data["data"]
    logits = model(points, extern_data["data:seq_len"].to(points.device))
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
