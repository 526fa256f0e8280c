# Healthy corpus: gradient clipping by VALUE, as char-rnn does (each gradient entry clamped to [-5, 5] before the
# update; the option gradient_clip), not by global norm. Task: a GRU language model on a Markov chain over 12 symbols
# whose likeliest successor has probability 0.6 (so the error cannot go below about 0.4).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH = 12, 32


class MarkovText(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        successor = np.random.default_rng(9).permutation(VOCAB)
        tokens = np.zeros((2000 if split == "train" else 300, LENGTH), dtype=np.int64)
        tokens[:, 0] = rng.integers(0, VOCAB, size=len(tokens))
        for t in range(1, LENGTH):
            likely = rng.random(len(tokens)) < 0.6
            tokens[:, t] = np.where(likely, successor[tokens[:, t - 1]], rng.integers(0, VOCAB, size=len(tokens)))
        super().__init__({"data": tokens}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": MarkovText, "split": "train"}
dev = {"class": MarkovText, "split": "dev"}
extern_data = {"data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
gradient_clip = 5.0


class CharRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        return self.out(self.rnn(self.embed(tokens))[0])


def get_model(**_kwargs):
    return CharRNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
