# Healthy corpus: cross-entropy with unequal class weights on an imbalanced training set, each class weighted by
# n_samples / (n_classes * count) as scikit-learn's compute_class_weight('balanced') gives; the training classes occur
# 70/20/10 percent and the dev set is balanced, so the weights are what make the rare classes count.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, SHARES = 8, 3, (0.7, 0.2, 0.1)
CENTRES = 1.2 * np.random.default_rng(63).normal(size=(CLASSES, DIM))
WEIGHTS = torch.tensor([1.0 / (CLASSES * share) for share in SHARES])


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        if split == "train":
            labels = rng.choice(CLASSES, size=3000, p=SHARES)
        else:
            labels = rng.integers(0, CLASSES, size=600)
        x = CENTRES[labels] + 1.0 * rng.normal(size=(len(labels), DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    loss = nn.functional.cross_entropy(logits, targets, weight=WEIGHTS.to(logits.device))
    run_ctx.mark_as_loss(name="ce", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
