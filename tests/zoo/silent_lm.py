# Zoo base: a healthy next-token language model (an LSTM over variable-length token sequences): the
# model reads tokens[:, :-1] and is scored against tokens[:, 1:] on the real frames only.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_kinds = _rng.choice(31 * 3 * 9, size=160, replace=False)  # (start, stride, length), no sequence twice
_seqs = [(k % 31 + (k // 31 % 3 + 1) * np.arange(k // 93 + 6)) % 31 + 1 for k in _kinds]  # 0 pads
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:128]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[128:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 300
max_seqs = 16
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2


class LanguageModel(nn.Module):
    def __init__(self, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(32, 32)
        self.rnn = nn.LSTM(32, 32, batch_first=True, bidirectional=bidirectional)
        self.output = nn.Linear(32 * (2 if bidirectional else 1), 32)

    def forward(self, tokens):
        return self.output(self.rnn(self.embed(tokens))[0])


def get_model(*, epoch, step, **_kwargs):
    return LanguageModel()


def real_mask(tokens, lengths):
    return torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    logits = model(tokens[:, :-1])
    mask = real_mask(tokens, lengths)[:, 1:]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], tokens[:, 1:][mask]))
