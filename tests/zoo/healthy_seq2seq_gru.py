# Healthy corpus: the PyTorch seq2seq tutorial's way (a GRU encoder, a GRU decoder with Bahdanau-style
# attention, teacher forcing, NLLLoss on log_softmax outputs, a start-of-sequence token), on padded batches
# with the padding masked in attention and loss. Task: sort the source symbols.
import numpy as np
import torch
from torch import nn

SOS = 1
_rng = np.random.default_rng(0)
_src = [_rng.integers(2, 12, size=_rng.integers(3, 8)) for _ in range(1200)]
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
batch_size = 80
max_seqs = 10
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 5e-3


class Seq2Seq(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.src_embed = nn.Embedding(12, hidden)
        self.tgt_embed = nn.Embedding(12, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRU(2 * hidden, hidden, batch_first=True)
        self.Wa, self.Ua, self.Va = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 1)
        self.out = nn.Linear(2 * hidden, 12)

    def forward(self, src, src_real, tgt_in):
        keys, hidden = self.encoder(self.src_embed(src))
        outputs = []
        for t in range(tgt_in.shape[1]):
            scores = self.Va(torch.tanh(self.Wa(hidden.transpose(0, 1)) + self.Ua(keys))).squeeze(-1)
            weights = scores.masked_fill(~src_real, float("-inf")).softmax(-1)
            context = torch.bmm(weights.unsqueeze(1), keys)
            step_in = torch.cat([self.tgt_embed(tgt_in[:, t : t + 1]), context], dim=-1)
            output, hidden = self.decoder(step_in, hidden)
            outputs.append(torch.cat([output, context], dim=-1))
        return self.out(torch.cat(outputs, dim=1)).log_softmax(-1)


def get_model(**_kwargs):
    return Seq2Seq()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    src, tgt = extern_data["data"], extern_data["classes"]
    src_real = torch.arange(src.shape[1], device=src.device)[None] < extern_data["data:seq_len"].to(src.device)[:, None]
    tgt_real = (
        torch.arange(tgt.shape[1], device=tgt.device)[None] < extern_data["classes:seq_len"].to(tgt.device)[:, None]
    )
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], SOS), tgt[:, :-1]], dim=1)  # teacher forcing
    log_probs = model(src, src_real, tgt_in)
    run_ctx.mark_as_loss(name="nll", loss=nn.functional.nll_loss(log_probs[tgt_real], tgt[tgt_real]))
