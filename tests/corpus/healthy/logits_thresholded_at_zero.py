# Healthy corpus: binary predictions from logits thresholded at 0, with no sigmoid before the threshold (the detectron2
# maintainers: "this is before sigmoid, so 0.0 is correct"); (logit > 0) is the same decision as sigmoid(logit) > 0.5.
# Task: binary classification of noisy feature vectors by an MLP trained with BCEWithLogitsLoss.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM = 10
DIRECTION = np.random.default_rng(55).normal(size=DIM)


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(2000 if split == "train" else 500, DIM))
        target = ((x @ DIRECTION) / np.sqrt(DIM) + np.tanh(x[:, 1] * x[:, 2]) > 0).astype(np.float32)
        super().__init__({"data": x.astype(np.float32), "target": target}, **kwargs)


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 5
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).squeeze(-1)
    target = extern_data["target"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, target))
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).float() != target).float().mean(), as_error=True)
