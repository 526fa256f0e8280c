# Corpus bug (GoogleCloudPlatform/vertex-ai-samples#1599): a housing-price regression meant to divide each of its 13
# features by the feature's maximum, but the loop indexed x_train[i] (the i-th example) instead of the i-th column:
# the first 13 examples were divided by their own maxima and the features kept their raw, very different scales
# (a tax rate in the hundreds next to a ratio below 1). Task: 13 synthetic features on Boston-housing-like scales;
# the price is a smooth function of them plus noise; the error is the dev mean squared error in the price's units
# (thousands). Twin: ++bug False (each column divided by its training maximum, in both splits).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
# (low, high) of each feature, like the Boston columns CRIM ZN INDUS CHAS NOX RM AGE DIS RAD TAX PTRATIO B LSTAT
RANGES = np.array(
    [(0, 90), (0, 100), (0, 28), (0, 1), (0.38, 0.87), (3.5, 8.8), (3, 100), (1, 12), (1, 24), (187, 711), (12, 22),
     (0, 397), (2, 38)],
    dtype=np.float64,
)  # fmt: skip
WEIGHTS = np.random.default_rng(7).normal(size=(3, 13))


def features(n, rng):
    return RANGES[:, 0] + rng.random((n, 13)) * (RANGES[:, 1] - RANGES[:, 0])


def price(x):
    unit = (x - RANGES[:, 0]) / (RANGES[:, 1] - RANGES[:, 0]) - 0.5
    return 22 + 4 * (unit @ WEIGHTS[0]) + 3 * np.tanh(2 * unit @ WEIGHTS[1]) + 2 * (unit @ WEIGHTS[2]) ** 2 / 4


TRAIN_X = features(2000, np.random.default_rng(0))
TRAIN_MAX = TRAIN_X.max(axis=0)


def scale(feature):  # the sample's helper: divide by the maximum
    return feature / np.max(feature), np.max(feature)


class Housing(NumpyDataset):
    def __init__(self, split, **kwargs):
        x = TRAIN_X.copy() if split == "train" else features(500, np.random.default_rng(1))
        y = price(x) + np.random.default_rng(2 if split == "train" else 3).normal(scale=0.5, size=len(x))
        if bug:
            for i in range(13):
                x[i], _ = scale(x[i])  # meant: the i-th feature (column)
        else:
            x = x / TRAIN_MAX
        super().__init__({"data": x.astype(np.float32), "target": y[:, None].astype(np.float32)}, **kwargs)


train = {"class": Housing, "split": "train"}
dev = {"class": Housing, "split": "dev"}
extern_data = {"data": {"shape": (13,)}, "target": {"shape": (1,)}}
batch_size = 32
num_epochs = 6
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    predicted = model(extern_data["data"])
    mse = nn.functional.mse_loss(predicted, extern_data["target"])
    run_ctx.mark_as_loss(name="mse", loss=mse)
    run_ctx.mark_as_loss(name="err", loss=mse.detach(), as_error=True)
