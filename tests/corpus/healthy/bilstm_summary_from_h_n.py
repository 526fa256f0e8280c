# Healthy corpus: a bidirectional nn.LSTM classifier summarised by h_n (PyTorch's documented final states): the forward
# direction's state after the last step and the backward direction's state after reading back to position 0, so the
# backward half is read at the first position by design. Task: sequences of 24 symbols whose class is set by a bit of
# the first and a bit of the last symbol, the others noise.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, CLASSES, HIDDEN = 8, 24, 4, 32


class Cued(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, VOCAB, size=(2000 if split == "train" else 400, LENGTH))
        labels = 2 * (x[:, 0] % 2) + x[:, -1] % 2  # a bit from the first symbol, a bit from the last
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
        _, (h_n, _) = self.lstm(self.embed(x))
        return self.fc(torch.cat([h_n[0], h_n[1]], dim=-1))  # forward after the last step, backward after the first


def get_model(**_kwargs):
    return BiRNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
