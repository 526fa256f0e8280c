# Healthy corpus: class-balancing weighted sampling. The training set is imbalanced (90% class 0, 10% class 1); each
# epoch draws as many training examples as it has, with replacement, each weighted by the inverse of its class's
# count, as torch.utils.data.WeightedRandomSampler(weights, num_samples=len(data), replacement=True) does, so the
# model sees both classes about equally often. Dev keeps its natural imbalance; its error is the plain error rate.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Imbalanced(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = (rng.random(4000 if split == "train" else 2000) < 0.1).astype(np.int64)
        x = (rng.normal(size=(len(labels), 8)) + 2.0 * labels[:, None] * np.linspace(1, 0.2, 8)).astype(np.float32)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 2}, **kwargs)
        self.balanced = split == "train"

    def get_seq_order(self, epoch):
        if not self.balanced:
            return super().get_seq_order(epoch)
        labels = self.arrays["classes"]
        weights = 1.0 / np.bincount(labels)[labels]
        rng = np.random.default_rng([self.random_seed, epoch])
        order = rng.choice(len(labels), size=len(labels), replace=True, p=weights / weights.sum())
        return self.filtered(order)


train = {"class": Imbalanced, "split": "train"}
dev = {"class": Imbalanced, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
