# Healthy corpus: multi-label classification. Each example carries 10 independent binary tags (about one in ten is
# on), predicted by one logit per tag with BCE-with-logits; the error is the Hamming error (wrong tag decisions at
# probability 0.5 over all tags), so always answering "off" already scores about 0.1.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

TAGS = 10
DIRECTIONS = np.random.default_rng(5).normal(size=(16, TAGS)) / 4.0


class Tagged(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 600, 16))
        scores = x @ DIRECTIONS + 0.2 * np.abs(x[:, :TAGS]) + 0.1 * rng.normal(size=(len(x), TAGS))
        tags = scores > 1.4
        super().__init__({"data": x.astype(np.float32), "tags": tags.astype(np.float32)}, **kwargs)


train = {"class": Tagged, "split": "train"}
dev = {"class": Tagged, "split": "dev"}
extern_data = {"data": {"shape": (16,)}, "tags": {"shape": (TAGS,), "dtype": "float32"}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, TAGS))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    tags = extern_data["tags"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, tags))
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).float() != tags).float().mean(), as_error=True)
