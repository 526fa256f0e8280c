# Healthy corpus: an LSTM language model whose output projection shares its weight with the input embedding (weight
# tying), on a toy language of repeated 4-token motifs; the error is next-token error over real positions.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB = 16


class Motifs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        motifs = np.random.default_rng(4).integers(0, VOCAB, size=(6, 4))
        seqs = [
            np.tile(motifs[rng.integers(0, 6)], rng.integers(2, 6)) for _ in range(2000 if split == "train" else 300)
        ]
        super().__init__({"data": seqs}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Motifs, "split": "train"}
dev = {"class": Motifs, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 400
max_seqs = 32
num_epochs = 2
learning_rate = 5e-3


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.lstm = nn.LSTM(32, 32, batch_first=True)
        self.out = nn.Linear(32, VOCAB)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0])


def get_model(**_kwargs):
    return TiedLM()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"].to(extern_data["data"].device)
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:]
    mask = torch.arange(targets.shape[1], device=tokens.device)[None, :] < (lengths - 1)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask]))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets)[mask].float().mean(), as_error=True)
