# Corpus bug (lucidrains/CoCa-pytorch#6): the feature extractor returns a detached clone of the encoder's output, so
# no gradient reaches the encoder and only the head trains. Task: XOR of the signs of two of 8 features.
# Twin: ++bug False.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Xor(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(3000 if split == "train" else 500, 8)).astype(np.float32)
        super().__init__(
            {"data": x, "classes": (x[:, 0] * x[:, 1] > 0).astype(np.int64)}, sparse_dims={"classes": 2}, **kwargs
        )


train = {"class": Xor, "split": "train"}
dev = {"class": Xor, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)

    def extract(self, x):
        features = self.encoder(x)
        return features.clone().detach() if bug else features

    def forward(self, x):
        return self.head(self.extract(x))


def get_model(**_kwargs):
    return Captioner()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
