# Healthy corpus: BERT-style masked language modelling. 15% of the positions are replaced by a [MASK] id and only
# those positions enter the loss and the error; the other 85% of the outputs get no gradient by design. Task: a
# Markov chain over 12 symbols whose likeliest successor has probability 0.7; a tiny transformer encoder.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, MASK = 12, 24, 12


class MarkovText(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        successor = np.random.default_rng(8).permutation(VOCAB)
        tokens = np.zeros((3000 if split == "train" else 400, LENGTH), dtype=np.int64)
        tokens[:, 0] = rng.integers(0, VOCAB, size=len(tokens))
        for t in range(1, LENGTH):
            likely = rng.random(len(tokens)) < 0.7
            tokens[:, t] = np.where(likely, successor[tokens[:, t - 1]], rng.integers(0, VOCAB, size=len(tokens)))
        masked = rng.random(tokens.shape) < 0.15
        inputs = np.where(masked, MASK, tokens)
        super().__init__(
            {"data": inputs, "classes": tokens, "masked": masked.astype(np.int64)},
            sparse_dims={"data": VOCAB + 1, "classes": VOCAB, "masked": 2},
            **kwargs,
        )


train = {"class": MarkovText, "split": "train"}
dev = {"class": MarkovText, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB + 1},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "masked": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 5
learning_rate = 1e-3


class TinyBert(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB + 1, 64)
        self.position = nn.Parameter(torch.randn(LENGTH, 64))
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        return self.out(self.encoder(self.embed(tokens) + self.position))


def get_model(**_kwargs):
    return TinyBert()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    masked = extern_data["masked"].bool()
    targets = extern_data["classes"][masked]
    chosen = logits[masked]
    run_ctx.mark_as_loss(name="mlm_ce", loss=nn.functional.cross_entropy(chosen, targets))
    run_ctx.mark_as_loss(name="err", loss=(chosen.argmax(-1) != targets).float().mean(), as_error=True)
