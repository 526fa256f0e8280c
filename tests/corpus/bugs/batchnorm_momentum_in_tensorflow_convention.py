# Corpus bug (r9y9/tacotron_pytorch#19): BatchNorm gets momentum=0.99 copied from a TensorFlow model; TensorFlow's
# momentum weights the old running average, PyTorch's the new batch, so the running statistics used at evaluation are
# nearly those of the last training batch. Task: classify clusters from small batches of widely spread features.
# Twin: ++bug False (momentum = 1 - 0.99 = 0.01).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class SpreadClusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 800
        classes = rng.integers(0, 6, size=n)
        centers = np.random.default_rng(3).normal(size=(6, 16))
        scale = np.exp(np.random.default_rng(4).normal(size=16))
        x = ((centers[classes] + 0.8 * rng.normal(size=(n, 16))) * scale + 3.0).astype(np.float32)
        super().__init__({"data": x, "classes": classes}, sparse_dims={"classes": 6}, **kwargs)


train = {"class": SpreadClusters, "split": "train"}
dev = {"class": SpreadClusters, "split": "dev"}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 6}}
batch_size = 8
num_epochs = 2
learning_rate = 2e-3


def get_model(**_kwargs):
    momentum = 0.99 if bug else 0.01
    return nn.Sequential(
        nn.BatchNorm1d(16, momentum=momentum),
        nn.Linear(16, 64),
        nn.BatchNorm1d(64, momentum=momentum),
        nn.ReLU(),
        nn.Linear(64, 6),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
