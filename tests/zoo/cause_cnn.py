# Zoo base (issue 41): a healthy small CNN (conv, ReLU, max-pool, linear; no batch norm) on 8-bit images
# of which quadrant is brightest, scaled to [0, 1] when the dataset is built (as torchvision's ToTensor does)
# and standardized in the step with the pixels' mean and std (as its Normalize does).
import numpy as np
from torch import nn

_rng = np.random.default_rng(4)
_y = _rng.integers(0, 4, 1200)
_x = _rng.integers(0, 160, size=(1200, 1, 12, 12)).astype(np.float32)
for _i, _q in enumerate(_y):
    _x[_i, :, 6 * (_q // 2) : 6 * (_q // 2) + 6, 6 * (_q % 2) : 6 * (_q % 2) + 6] += 90
images = _x / 255.0
train = {
    "class": "NumpyDataset",
    "arrays": {"data": images[:1000], "classes": _y[:1000]},
    "sparse_dims": {"classes": 4},
}
dev = {"class": "NumpyDataset", "arrays": {"data": images[1000:], "classes": _y[1000:]}, "sparse_dims": {"classes": 4}}
extern_data = {"data": {"shape": (1, 12, 12)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-3


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 36, 4))


def normalize(x):
    return (x - 0.45) / 0.25


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(normalize(extern_data["data"]))
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
