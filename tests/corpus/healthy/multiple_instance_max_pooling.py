# Healthy corpus: multiple-instance learning with bag labels only: each example is a bag of 12 instances, positive
# when any of its instances is of the target kind (a cluster of its own), and the model scores every instance and
# max-pools the scores, so at each step only the top-scoring instance of a bag gets a gradient. 'err' is the
# bag-level error of the max-pooled logit thresholded at 0.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

INSTANCES, DIM, KINDS = 12, 10, 6
KIND_CENTRES = 1.2 * np.random.default_rng(151).normal(size=(KINDS, DIM))


class Bags(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 600
        labels = (rng.random(n) < 0.5).astype(np.int64)
        kinds = rng.integers(1, KINDS, size=(n, INSTANCES))  # kind 0 is the target kind
        for i in np.flatnonzero(labels):
            kinds[i, rng.integers(0, INSTANCES)] = 0
        x = KIND_CENTRES[kinds] + rng.normal(size=(n, INSTANCES, DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Bags, "split": "train"}
dev = {"class": Bags, "split": "dev"}
extern_data = {"data": {"shape": (INSTANCES, DIM)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    bag_logits = model(extern_data["data"]).squeeze(-1).amax(dim=1)  # [B]: the top instance of each bag
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(bag_logits, targets.float()))
    run_ctx.mark_as_loss(name="err", loss=((bag_logits > 0).long() != targets).float().mean(), as_error=True)
