# Healthy corpus: a curriculum. In epoch 1 the sequences come sorted by length, shortest first (the loss rises
# through the epoch as they get harder); from epoch 2 on they are shuffled. Task: the parity of the number of 1s
# in a binary sequence, with a GRU over the real frames (packed).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Parity(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(2, 12, size=2000 if split == "train" else 300)
        bits = [rng.integers(0, 2, size=t) for t in lengths]
        labels = np.array([b.sum() % 2 for b in bits])
        self.curriculum = split == "train"
        super().__init__({"data": bits, "classes": labels}, sparse_dims={"data": 2, "classes": 2}, **kwargs)

    def get_seq_order(self, epoch):
        if self.curriculum and epoch == 1:
            return np.argsort(self.seq_lengths(), kind="stable")
        return np.random.default_rng([self.random_seed, epoch]).permutation(self.num_seqs)


train = {"class": Parity, "split": "train"}
dev = {"class": Parity, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 320
max_seqs = 32
num_epochs = 3
learning_rate = 5e-3


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(2, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, bits, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(bits), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, last = self.rnn(packed)
        return self.out(last[0])


def get_model(**_kwargs):
    return Counter()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
