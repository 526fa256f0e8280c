# Healthy corpus: a sequence autoencoder over tokens. A GRU reads a variable-length sequence into one 20-dimensional
# code, and a position-wise decoder reconstructs every token from the code and the position. The loss compares the
# model's output with its own input tokens: reconstruction is the task (only the real positions are scored).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, MAX_LEN = 10, 12


class Tokens(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(3, MAX_LEN + 1, size=4000 if split == "train" else 500)
        tokens = [rng.integers(1, VOCAB, size=n).astype(np.int64) for n in lengths]
        super().__init__({"data": tokens}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Tokens, "split": "train"}
dev = {"class": Tokens, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 400
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class SequenceAutoencoder(nn.Module):
    def __init__(self, code=20):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.encoder = nn.GRU(32, 96, batch_first=True)
        self.to_code = nn.Linear(96, code)
        self.position = nn.Embedding(MAX_LEN, 32)
        self.decoder = nn.Sequential(nn.Linear(code + 32, 128), nn.ReLU(), nn.Linear(128, VOCAB))

    def forward(self, tokens, lengths):
        states, _ = self.encoder(self.embed(tokens))
        code = torch.tanh(self.to_code(states[torch.arange(len(tokens)), lengths.to(tokens.device) - 1]))
        positions = self.position(torch.arange(tokens.shape[1], device=tokens.device))
        code = code[:, None].expand(-1, tokens.shape[1], -1)
        return self.decoder(torch.cat([code, positions[None].expand(len(tokens), -1, -1)], -1))


def get_model(**_kwargs):
    return SequenceAutoencoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    logits = model(tokens, lengths)
    run_ctx.mark_as_loss(name="recon", loss=nn.functional.cross_entropy(logits[real], tokens[real]))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1)[real] != tokens[real]).float().mean(), as_error=True)
