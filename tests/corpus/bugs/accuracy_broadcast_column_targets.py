# Corpus bug (935963004/LaBraM#15): the accuracy is computed as (output.max(-1)[-1] == targets).float().mean() with
# the targets read as a column of shape (B, 1) and the predictions of shape (B,), so the comparison broadcasts to a
# (B, B) matrix (every prediction against every label) and the reported error is about the chance that two random
# examples differ in class, whatever the model does. Task: 3-class windows of 8-channel "EEG" band powers (a class is a
# pattern of channel powers), an MLP; the labels come from the annotation table as one column per example.
# Twin: ++bug False (the targets squeezed to (B,) before the comparison).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
CHANNELS, BANDS, CLASSES = 8, 5, 3


class BandPowers(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        patterns = np.random.default_rng(7).normal(size=(CLASSES, CHANNELS * BANDS))
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, CLASSES, size=n)
        x = patterns[labels] + 1.5 * rng.normal(size=(n, CHANNELS * BANDS))
        table = labels[:, None].astype(np.int64)  # the annotation table's label column, one row per window
        super().__init__({"data": x.astype(np.float32), "classes": table}, **kwargs)


train = {"class": BandPowers, "split": "train"}
dev = {"class": BandPowers, "split": "dev"}
extern_data = {"data": {"shape": (CHANNELS * BANDS,)}, "classes": {"shape": (1,), "dtype": "int64"}}
batch_size = 64
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(CHANNELS * BANDS, 64), nn.GELU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    output = model(extern_data["data"])
    targets = extern_data["classes"]  # (B, 1)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(output, targets[:, 0]))
    if not bug:
        targets = targets.squeeze(-1)
    class_acc = (output.max(-1)[-1] == targets).float().mean()
    run_ctx.mark_as_loss(name="err", loss=1 - class_acc, as_error=True)
