# Corpus bug (yunjey/pytorch-tutorial#174): the bidirectional RNN classifier takes out[:, -1, :] of a bidirectional
# nn.LSTM as the summary of the sequence; at the last step the forward half has read the whole sequence but the
# backward half has read only the last element. Task: sequences of 24 symbols whose class is set by the first two
# symbols (a cue at the start, as in the opening words of a text), the other 22 symbols are noise; an embedding, a
# one-layer bidirectional LSTM (batch_first) and a linear classifier on the summary. Twin: ++bug False (the forward
# state at the last step and the backward state at the first step, i.e. h_n of both directions).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH, CLASSES, HIDDEN = 8, 24, 4, 32


class Cued(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, VOCAB, size=(2000 if split == "train" else 400, LENGTH))
        labels = (x[:, 0] + x[:, 1]) % CLASSES
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": CLASSES}, **kwargs)


train = {"class": Cued, "split": "train"}
dev = {"class": Cued, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 32
num_epochs = 5
learning_rate = 3e-3


class BiRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, HIDDEN, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * HIDDEN, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        if bug:
            summary = out[:, -1, :]  # the backward half here has read only the last symbol
        else:
            summary = torch.cat([out[:, -1, :HIDDEN], out[:, 0, HIDDEN:]], dim=-1)
        return self.fc(summary)


def get_model(**_kwargs):
    return BiRNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
