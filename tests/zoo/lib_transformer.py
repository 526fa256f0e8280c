# Library zoo: a healthy sequence labeller written the PyTorch-tutorial way: nn.TransformerEncoder with
# batch_first=False (time-major [T, B, F]), sinusoidal positions in a registered buffer, a causal mask
# and the padding mask from the :seq_len lengths, and a cross-entropy over the real frames only.
import math

import torch
from torch import nn

extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 9},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
}
train = {"class": "Task12AXDataset", "num_seqs": 64}
dev = {"class": "Task12AXDataset", "num_seqs": 16, "fixed_random_seed": 2}
batch_size = 400
max_seqs = 16
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-3


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):  # [T, B, F]
        return x + self.pe[: x.size(0)]


class Tagger(nn.Module):
    def __init__(self, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(9, d_model)
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=32, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.output = nn.Linear(d_model, 2)

    def forward(self, symbols, padding):  # symbols [B, T]; padding [B, T], True at padded frames
        x = self.pos(self.embed(symbols.t()) * math.sqrt(self.embed.embedding_dim))
        return self.output(self.encode(x, padding)).transpose(0, 1)  # [B, T, 2]

    def encode(self, x, padding):
        causal = torch.triu(torch.ones(x.shape[0], x.shape[0], dtype=torch.bool, device=x.device), diagonal=1)
        return self.encoder(x, mask=causal, src_key_padding_mask=padding)


def get_model(*, epoch, step, **_kwargs):
    return Tagger()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols, targets = extern_data["data"], extern_data["classes"]
    lengths = extern_data["data:seq_len"]
    mask = torch.arange(symbols.shape[1], device=symbols.device)[None, :] < lengths.to(symbols.device)[:, None]
    logits = model(symbols, ~mask)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask]))
