# Corpus bug (hassony2/kinetics_i3d_pytorch#6): a TensorFlow port passes its keep probability (0.9) to torch's
# Dropout, whose argument is the probability of dropping, so 90 % of the units are dropped. Task: XOR of the signs of
# two of 8 features through an MLP with dropout after each hidden layer. Twin: ++bug False (p = 1 - keep_prob).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
KEEP_PROB = 0.9


class Xor(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Xor, "split": "train"}
dev = {"class": Xor, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    p = KEEP_PROB if bug else 1 - KEEP_PROB
    return nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Dropout(p), nn.Linear(32, 32), nn.ReLU(), nn.Dropout(p), nn.Linear(32, 2)
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
