# Zoo: a 4-class task on 3x32x32 images (which quadrant is brighter), trained as timm's recipes train (AdamW,
# label smoothing); the model comes from a config layered on top (timm_resnet18.py, timm_vit.py).
import numpy as np
from torch import nn

_rng = np.random.default_rng(2)
_y = _rng.integers(0, 4, 640)
_x = _rng.normal(size=(640, 3, 32, 32)).astype(np.float32)
for _i, _q in enumerate(_y):
    _x[_i, :, 16 * (_q // 2) : 16 * (_q // 2) + 16, 16 * (_q % 2) : 16 * (_q % 2) + 16] += 1.0
train = {"class": "NumpyDataset", "arrays": {"data": _x[:512], "classes": _y[:512]}, "sparse_dims": {"classes": 4}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[512:], "classes": _y[512:]}, "sparse_dims": {"classes": 4}}
extern_data = {"data": {"shape": (3, 32, 32)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.05}
learning_rate = 1e-3


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets, label_smoothing=0.1))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
