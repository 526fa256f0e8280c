# Healthy corpus: a Transformer encoder with LayerDrop as fairseq writes it (Fan et al.): in training each
# layer is skipped with probability 0.5, drawn anew each step; at evaluation all layers run. A classifier of
# variable-length token sequences (the padding masked): is token 3 among the first four tokens.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)
_seqs = [_rng.integers(4, 16, size=_rng.integers(5, 12)) for _ in range(1000)]
for _s in _seqs[::2]:
    _s[_rng.integers(0, 4)] = 3
_labels = np.array([int((s[:4] == 3).any()) for s in _seqs])
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[:800], "classes": _labels[:800]},
    "sparse_dims": {"data": 16, "classes": 2},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _seqs[800:], "classes": _labels[800:]},
    "sparse_dims": {"data": 16, "classes": 2},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 16},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 96
max_seqs = 8
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 2e-3


class Encoder(nn.Module):
    def __init__(self, layerdrop=0.5):
        super().__init__()
        self.embed = nn.Embedding(16, 32)
        self.pos = nn.Embedding(16, 32)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True) for _ in range(4)
        )
        self.layerdrop = layerdrop
        self.out = nn.Linear(32, 2)

    def forward(self, tokens, padding):
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in self.layers:
            dropout_probability = torch.empty(1).uniform_()
            if self.training and dropout_probability < self.layerdrop:
                continue
            x = layer(x, src_key_padding_mask=padding)
        real = (~padding).unsqueeze(-1).float()
        return self.out((x * real).sum(1) / real.sum(1))


def get_model(**_kwargs):
    return Encoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    padding = torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= lengths.to(tokens.device)[:, None]
    logits = model(tokens, padding)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
