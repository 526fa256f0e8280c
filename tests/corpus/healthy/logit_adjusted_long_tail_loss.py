# Healthy corpus: logit adjustment (Menon et al. 2021) for a long-tailed training set: the training loss is the
# cross-entropy of the logits plus tau * log(class prior), which pushes the model's plain logits toward the balanced
# error; dev is balanced and scored from the plain logits. The training set's classes follow a 20:1 long tail.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, TAU = 10, 5, 1.0
PRIORS = np.array([0.53, 0.26, 0.11, 0.075, 0.025])
CENTRES = np.random.default_rng(19).normal(size=(CLASSES, DIM)) * 0.8


class LongTail(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        if split == "train":
            labels = rng.choice(CLASSES, size=5000, p=PRIORS)
        else:
            labels = np.repeat(np.arange(CLASSES), 200)
        x = CENTRES[labels] + rng.normal(size=(len(labels), DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


LOG_PRIORS = torch.tensor(np.log(PRIORS), dtype=torch.float32)
train = {"class": LongTail, "split": "train"}
dev = {"class": LongTail, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 4
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    adjusted = logits + TAU * LOG_PRIORS.to(logits.device)  # the logit-adjusted loss of training
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(adjusted, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
