# Corpus bug (nutonomy/nuscenes-devkit#728): the prediction head stacks two linear layers with no nonlinearity between
# them, so it is one linear map in disguise. Task: classify points by which of two interleaved rings they lie on.
# Twin: ++bug False (a ReLU between the layers).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Rings(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        classes = rng.integers(0, 2, size=n)
        radius = 1.0 + classes + 0.2 * rng.normal(size=n)
        angle = rng.uniform(0, 2 * np.pi, size=n)
        points = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
        features = np.concatenate([points, 0.1 * rng.normal(size=(n, 6))], 1).astype(np.float32)
        super().__init__({"data": features, "classes": classes}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Rings, "split": "train"}
dev = {"class": Rings, "split": "dev"}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class Predictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(8, 64)
        self.head = (
            nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 2))
            if bug
            else nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
        )

    def forward(self, x):
        return self.head(self.backbone(x))


def get_model(**_kwargs):
    return Predictor()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
