# Healthy corpus: random Fourier features (Rahimi and Recht 2007): the 2-d inputs pass through a fixed random Gaussian
# projection (bandwidth 1.5) and cos/sin, kept as buffers that are never trained, and only the linear head on the 512
# features learns. Task: 4 classes given by the quadrant of a rotated, warped plane (a nonlinear boundary).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

FEATURES, CLASSES = 256, 4


class Plane(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(-2, 2, size=(3000 if split == "train" else 800, 2))
        u, v = x[:, 0] + 0.5 * np.sin(2 * x[:, 1]), x[:, 1] + 0.5 * np.sin(2 * x[:, 0])
        labels = (u > 0).astype(np.int64) * 2 + (v > 0).astype(np.int64)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class RandomFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(161)
        self.register_buffer("projection", torch.randn(2, FEATURES, generator=generator) * 1.5)
        self.head = nn.Linear(2 * FEATURES, CLASSES)

    def forward(self, x):
        z = x @ self.projection
        return self.head(torch.cat([torch.cos(z), torch.sin(z)], dim=-1) / FEATURES**0.5)


train = {"class": Plane, "split": "train"}
dev = {"class": Plane, "split": "dev"}
extern_data = {"data": {"shape": (2,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 5
learning_rate = 1e-2


def get_model(**_kwargs):
    return RandomFeatures()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
