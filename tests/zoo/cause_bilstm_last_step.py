# Zoo bug (after a public report of a bidirectional RNN classifier summarised at its last output step, written
# anew): the summary of a bidirectional nn.LSTM is out[:, -1], where the backward direction has read one element.
# Each sequence's class is its first symbol, which only the backward direction could carry to the summary.
# ++summary_from_h_n True is the healthy twin (both directions' final states).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

summary_from_h_n = False


class FirstSymbol(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        symbols = rng.integers(0, 4, size=(400, 12))
        super().__init__({"data": symbols, "classes": symbols[:, 0]}, sparse_dims={"data": 4, "classes": 4}, **kwargs)


train = {"class": FirstSymbol, "split": "train"}
dev = {"class": FirstSymbol, "split": "dev"}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 4},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
}
batch_size = 16
num_epochs = 1
learning_rate = 3e-3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(4, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True, bidirectional=True)
        self.out = nn.Linear(32, 4)

    def forward(self, symbols):
        out, (h_n, _) = self.lstm(self.embed(symbols))
        summary = torch.cat([h_n[0], h_n[1]], -1) if summary_from_h_n else out[:, -1]
        return self.out(summary)


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
