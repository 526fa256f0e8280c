# Zoo bug: two keys of each example (a question and its answer) packed for their RNNs; the batch is sorted by the
# question's length, the answer by its own length, and the answer's order is never undone, so each question meets
# another example's answer. Twin: ++bug False (one order for both keys).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Pairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 400 if split == "train" else 100
        first = [rng.integers(0, 6, size=t) for t in rng.integers(2, 9, size=n)]
        second = [rng.integers(0, 6, size=t) for t in rng.integers(2, 9, size=n)]
        labels = np.array([(a[-1] + b[-1]) % 4 for a, b in zip(first, second, strict=True)])
        super().__init__(
            {"data": first, "answer": second, "classes": labels},
            sparse_dims={"data": 6, "answer": 6, "classes": 4},
            **kwargs,
        )


train = {"class": Pairs, "split": "train"}
dev = {"class": Pairs, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
    "answer": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
}
batch_size = 160
max_seqs = 16
num_epochs = 1


class PairModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 8)
        self.first = nn.GRU(8, 16, batch_first=True)
        self.second = nn.GRU(8, 16, batch_first=True)
        self.out = nn.Linear(32, 4)

    def encode(self, rnn, tokens, lengths, enforce_sorted):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=enforce_sorted
        )
        return rnn(packed)[1][0]

    def forward(self, data, data_len, answer, answer_len):
        order = torch.argsort(data_len, descending=True)
        answer_order = torch.argsort(answer_len, descending=True) if bug else order
        h = self.encode(self.first, data[order], data_len[order], True)
        g = self.encode(self.second, answer[answer_order], answer_len[answer_order], bug)
        return self.out(torch.cat([h, g], -1)), order


def get_model(**_kwargs):
    return PairModel()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, order = model(
        extern_data["data"], extern_data["data:seq_len"], extern_data["answer"], extern_data["answer:seq_len"]
    )
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"][order]))
