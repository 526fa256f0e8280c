# Zoo base (loss and layout contracts): a small CNN on colour images stored channels last, as image
# files and most image libraries give them: extern_data declares (H, W, 3); the model moves the
# channel axis first with permute, as Conv2d wants. The silent_contract_* bug files redefine one thing.
import numpy as np
from torch import nn

_rng = np.random.default_rng(5)
_y = _rng.integers(0, 4, 160)
_x = _rng.normal(size=(160, 8, 8, 3)).astype(np.float32)
for _i, _q in enumerate(_y):
    _x[_i, 4 * (_q // 2) : 4 * (_q // 2) + 4, 4 * (_q % 2) : 4 * (_q % 2) + 4, _q % 3] += 2.0
train = {"class": "NumpyDataset", "arrays": {"data": _x[:128], "classes": _y[:128]}, "sparse_dims": {"classes": 4}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[128:], "classes": _y[128:]}, "sparse_dims": {"classes": 4}}
extern_data = {"data": {"shape": (8, 8, 3)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 3e-3


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 4)
    )


def to_model_layout(images):
    return images.permute(0, 3, 1, 2)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(to_model_layout(extern_data["data"]))
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
