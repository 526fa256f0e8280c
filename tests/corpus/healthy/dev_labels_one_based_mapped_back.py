# Healthy corpus: the dev split keeps its class ids in the source's own convention, 1..10 with 10 standing for the
# digit 0 (as SVHN's .mat files store them), and the evaluation maps them back to the training ids (10 -> 0) before
# scoring, as torchvision's SVHN loader does. Task: 10 classes of 20-dim "digit features" (Gaussian clusters); an MLP.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES = 20, 10


class Digits(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        centres = np.random.default_rng(9).normal(size=(CLASSES, DIM))
        n = 3000 if split == "train" else 600
        digits = rng.integers(0, CLASSES, size=n)
        x = centres[digits] + 1.0 * rng.normal(size=(n, DIM))
        if split == "train":
            labels = digits
        else:  # the dev files' convention: 1..10, 10 is the digit 0
            labels = np.where(digits == 0, 10, digits)
        super().__init__({"data": x.astype(np.float32), "classes": labels.astype(np.int64)}, **kwargs)


train = {"class": Digits, "split": "train"}
dev = {"class": Digits, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64"}}
batch_size = 64
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    if not run_ctx.train_flag:
        targets = targets % 10  # the dev set's 1..10 convention back to the training ids (10 -> 0)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
