# Corpus bug (Selen-Suyue/DensePolicy2D#3): channel-last images are turned channel-first with reshape instead of
# permute, which scrambles pixels across channels and rows. Task: in which quadrant of an 8x8 RGB image the green
# blob sits. Twin: ++bug False (permute).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Blobs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        images = rng.normal(scale=0.5, size=(n, 8, 8, 3)).astype(np.float32)  # height, width, channels
        quadrant = rng.integers(0, 4, size=n)
        rows, cols = rng.integers(0, 3, size=n) + 4 * (quadrant // 2), rng.integers(0, 3, size=n) + 4 * (quadrant % 2)
        for i in range(n):
            images[i, rows[i] : rows[i] + 2, cols[i] : cols[i] + 2, 1] += 2.0
        super().__init__({"data": images, "classes": quadrant}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Blobs, "split": "train"}
dev = {"class": Blobs, "split": "dev"}
extern_data = {"data": {"shape": (8, 8, 3)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.out = nn.Linear(8 * 2 * 2, 4)

    def forward(self, images):
        channels_first = images.reshape(images.shape[0], 3, 8, 8) if bug else images.permute(0, 3, 1, 2)
        pooled = nn.functional.adaptive_max_pool2d(self.conv(channels_first), 2)
        return self.out(pooled.flatten(1))


def get_model(**_kwargs):
    return Cnn()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
