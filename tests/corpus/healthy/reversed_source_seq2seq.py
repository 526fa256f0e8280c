# Healthy corpus: an LSTM encoder-decoder that reads its source in reverse order, on purpose (Sutskever et al. 2014:
# reversing the source puts the first target tokens next to their inputs). Task: copy a sequence of 8 digits; the
# encoder reads it reversed in training and at evaluation alike; the decoder is teacher-forced in training and decodes
# greedily at evaluation. The error is the dev token error of the greedy output.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

LENGTH, DIGITS, HIDDEN = 8, 10, 128
BOS = DIGITS


class Copies(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        source = rng.integers(0, DIGITS, size=(3000 if split == "train" else 500, LENGTH))
        super().__init__(
            {"data": source, "classes": source.copy()}, sparse_dims={"data": DIGITS, "classes": DIGITS}, **kwargs
        )


train = {"class": Copies, "split": "train"}
dev = {"class": Copies, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": DIGITS},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": DIGITS},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(DIGITS, 32)
        self.tgt_embed = nn.Embedding(DIGITS + 1, 32)
        self.encoder = nn.LSTM(32, HIDDEN, batch_first=True)
        self.decoder = nn.LSTM(32, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, DIGITS)

    def encode(self, source):
        _, state = self.encoder(self.src_embed(source.flip(1)))  # the source, reversed by design
        return state

    def decode(self, target_in, state):
        output, state = self.decoder(self.tgt_embed(target_in), state)
        return self.out(output), state


def get_model(**_kwargs):
    return Seq2Seq()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    source, target = extern_data["data"], extern_data["classes"]
    state = model.encode(source)
    target_in = torch.cat([torch.full_like(target[:, :1], BOS), target[:, :-1]], 1)
    logits, _ = model.decode(target_in, state)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.transpose(1, 2), target))
    if run_ctx.train_flag:
        predicted = logits.argmax(-1)
    else:
        with torch.no_grad():
            token, outputs = torch.full_like(target[:, :1], BOS), []
            for _ in range(LENGTH):
                step_logits, state = model.decode(token, state)
                token = step_logits.argmax(-1)
                outputs.append(token)
            predicted = torch.cat(outputs, 1)
    run_ctx.mark_as_loss(name="err", loss=(predicted != target).float().mean(), as_error=True)
