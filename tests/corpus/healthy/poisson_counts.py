# Healthy corpus: Poisson regression of event counts with a log link, PoissonNLLLoss(log_input=True).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Counts(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 4)).astype(np.float32)
        rate = np.exp(0.5 + 0.6 * x[:, 0] - 0.4 * x[:, 1])
        super().__init__({"data": x, "counts": rng.poisson(rate).astype(np.float32)}, **kwargs)


train = {"class": Counts, "split": "train"}
dev = {"class": Counts, "split": "dev"}
extern_data = {"data": {"shape": (4,)}, "counts": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    log_rate = model(extern_data["data"]).squeeze(-1)
    loss = nn.functional.poisson_nll_loss(log_rate, extern_data["counts"], log_input=True)
    run_ctx.mark_as_loss(name="poisson_nll", loss=loss)
