# Healthy corpus: speech-style CTC, written as torch's docs write it: log_softmax over [T, B, C] and
# F.ctc_loss with the input and target lengths as int64 tensors on the CPU (the framework keeps :seq_len on
# the CPU; ctc_loss accepts them there). Frames: noisy one-hot symbols, each repeated 2-4 frames; label: the
# symbols once.
import numpy as np
from torch import nn

_rng = np.random.default_rng(0)
_labels = [_rng.integers(1, 6, size=_rng.integers(2, 6)) for _ in range(700)]
_feats = []
for _l in _labels:
    _frames = np.repeat(_l, _rng.integers(2, 5, size=len(_l)))
    _x = np.eye(6, dtype=np.float32)[_frames] + 0.3 * _rng.normal(size=(len(_frames), 6)).astype(np.float32)
    _feats.append(_x)
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _feats[:600], "classes": _labels[:600]},
    "sparse_dims": {"classes": 6},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _feats[600:], "classes": _labels[600:]},
    "sparse_dims": {"classes": 6},
}
extern_data = {
    "data": {"shape": (None, 6), "dtype": "float32"},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
}
batch_size = 200
max_seqs = 8
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-2


class Recognizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 32, batch_first=True, bidirectional=True)
        self.out = nn.Linear(64, 6)  # 0 is the blank

    def forward(self, feats):
        return self.out(self.lstm(feats)[0])


def get_model(**_kwargs):
    return Recognizer()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    log_probs = model(extern_data["data"]).log_softmax(-1).transpose(0, 1)  # [T, B, C]
    loss = nn.functional.ctc_loss(
        log_probs,
        extern_data["classes"],
        extern_data["data:seq_len"],
        extern_data["classes:seq_len"],
        blank=0,
        zero_infinity=True,
    )
    run_ctx.mark_as_loss(name="ctc", loss=loss)
