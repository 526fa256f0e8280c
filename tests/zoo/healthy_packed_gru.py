# Healthy corpus: a text classifier over packed sequences, the torch-tutorial way: an embedding with
# padding_idx=0, pack_padded_sequence with the lengths on the CPU (torch requires them there),
# enforce_sorted=False, and the GRU's last hidden state. Label: whether the sequence holds more 1-tokens than
# 2-tokens.
import numpy as np
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

_rng = np.random.default_rng(0)
_seqs = [_rng.integers(1, 8, size=_rng.integers(3, 20)) for _ in range(1000)]
_labels = np.array([int((s == 1).sum() > (s == 2).sum()) for s in _seqs])
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[:800], "classes": _labels[:800]},
    "sparse_dims": {"data": 8, "classes": 2},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[800:], "classes": _labels[800:]},
    "sparse_dims": {"data": 8, "classes": 2},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 8},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 160
max_seqs = 8
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-2


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(8, 16, padding_idx=0)
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)
        return self.out(hidden[-1])


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
