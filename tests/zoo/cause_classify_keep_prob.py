# Zoo bug (after hassony2/kinetics_i3d_pytorch#6, written anew): a port from TensorFlow passes its keep probability
# (0.9) to torch's Dropout, whose argument is the probability of dropping. The clusters' classes are a parity of the
# features' signs (no single feature tells them), which the thinned network never learns.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

KEEP_PROB = 0.9


class Parity(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(2000, 8)).astype(np.float32)
        y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(np.int64)
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Parity, "split": "train"}
dev = {"class": Parity, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 16
learning_rate = 3e-3


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(
        nn.Linear(8, 32),
        nn.ReLU(),
        nn.Dropout(KEEP_PROB),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Dropout(KEEP_PROB),
        nn.Linear(32, 2),
    )
