# Zoo base: a healthy GRU encoder-decoder that runs its decoder over the whole target sequence at once (teacher
# forcing: the targets shifted right by one, SOS first), on the sorting task of healthy_seq2seq_gru.py.
import numpy as np
import torch
from torch import nn

SOS = 1
_rng = np.random.default_rng(0)
_src = [_rng.integers(2, 12, size=6) for _ in range(1200)]
_tgt = [np.sort(s) for s in _src]
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _src[:1000], "classes": _tgt[:1000]},
    "sparse_dims": {"data": 12, "classes": 12},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _src[1000:], "classes": _tgt[1000:]},
    "sparse_dims": {"data": 12, "classes": 12},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 12},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 12},
}
batch_size = 32
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 5e-3


class Seq2Seq(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.src_embed = nn.Embedding(12, hidden)
        self.tgt_embed = nn.Embedding(12, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 12)

    def forward(self, src, tgt_in):
        _, state = self.encoder(self.src_embed(src))
        states, _ = self.decoder(self.tgt_embed(tgt_in), state)
        return self.out(states)


def get_model(**_kwargs):
    return Seq2Seq()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    src, tgt = extern_data["data"], extern_data["classes"]
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], SOS), tgt[:, :-1]], dim=1)  # teacher forcing
    logits = model(src, tgt_in)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()))
