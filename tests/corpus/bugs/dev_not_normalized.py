# Corpus bug (PolymathicAI/the_well#68): the normalisation is applied to the training split only; dev feeds the raw
# measurements to a model trained on standardised ones. Task: 4 classes from 8 raw sensor readings.
# Twin: ++bug False.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
OFFSET, SCALE = np.linspace(20.0, 90.0, 8), np.linspace(5.0, 30.0, 8)


def readings(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    labels = rng.integers(0, 4, size=2000 if split == "train" else 500)
    centers = np.random.default_rng(5).normal(size=(4, 8))
    return OFFSET + SCALE * (centers[labels] + 0.7 * rng.normal(size=(len(labels), 8))), labels


class Sensors(NumpyDataset):
    def __init__(self, split, **kwargs):
        raw, labels = readings(split)
        train_raw, _ = readings("train")
        normalize = split == "train" or not bug
        x = (raw - train_raw.mean(0)) / train_raw.std(0) if normalize else raw
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Sensors, "split": "train", "seq_ordering": "random"}
dev = {"class": Sensors, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
