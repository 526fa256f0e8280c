# Healthy corpus: a deep ensemble (Lakshminarayanan et al. 2017) trained in one run: five MLPs with different random
# initialisations live in one module, each gets its own cross-entropy on the same batch (the losses are summed, so no
# member's gradient depends on another's), and the prediction averages their probabilities.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, MEMBERS = 20, 6, 5
CENTRES = np.random.default_rng(37).normal(size=(CLASSES, DIM)) * 0.5


class Clusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 800
        labels = rng.integers(0, CLASSES, size=n)
        x = CENTRES[labels] + rng.normal(size=(n, DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class Ensemble(nn.Module):
    def __init__(self):
        super().__init__()
        self.members = nn.ModuleList(
            nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES)) for _ in range(MEMBERS)
        )

    def forward(self, x):
        return torch.stack([member(x) for member in self.members])  # [members, B, classes]


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return Ensemble()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    losses = [nn.functional.cross_entropy(member, targets) for member in logits]
    run_ctx.mark_as_loss(name="ce", loss=sum(losses))
    averaged = torch.softmax(logits, dim=-1).mean(dim=0)
    run_ctx.mark_as_loss(name="err", loss=(averaged.argmax(-1) != targets).float().mean(), as_error=True)
