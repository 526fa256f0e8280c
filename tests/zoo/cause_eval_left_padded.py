# Zoo bug (after akanyaani/gpt-2-tensorflow2.0#35, written anew): a per-frame tagger with learned absolute position
# embeddings is trained on batches padded after each sequence and evaluated (run_ctx.train_flag False) with every
# sequence moved to the end of its row, padded on the left as batched generation pads, positions still counted from
# the row's start. Each frame's label depends on its position, so dev sees each symbol where training never showed
# it. Twin: ++bug False (the evaluation pads as training does).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, MAX_LEN = 6, 12


class Tagged(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        symbols, tags = [], []
        for _ in range(800 if split == "train" else 200):
            seq = rng.integers(1, VOCAB, size=int(rng.integers(3, MAX_LEN + 1)))
            symbols.append(seq)
            tags.append(((seq + np.arange(len(seq))) % 2).astype(np.int64))  # the tag needs the position
        super().__init__({"data": symbols, "classes": tags}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Tagged, "split": "train"}
dev = {"class": Tagged, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16 * MAX_LEN
max_seqs = 16
num_epochs = 2
learning_rate = 1e-2


class Tagger(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.symbols = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(MAX_LEN, dim)
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, symbols):
        positions = torch.arange(symbols.shape[1], device=symbols.device)  # from the row's start
        return self.out(self.symbols(symbols) + self.positions(positions)[None])


def get_model(**_kwargs):
    return Tagger()


def to_the_end(x, lengths):
    """Each row's sequence moved to the end of the row: padded on the left."""
    return torch.stack([row.roll(x.shape[1] - int(n)) for row, n in zip(x, lengths)])


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols, tags = extern_data["data"], extern_data["classes"]
    lengths = extern_data["data:seq_len"].to(symbols.device)
    real = torch.arange(symbols.shape[1], device=symbols.device)[None] < lengths[:, None]
    if bug and not run_ctx.train_flag:
        symbols, tags, real = (to_the_end(x, lengths) for x in (symbols, tags, real))
    logits = model(symbols)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[real], tags[real]))
    wrong = (logits.argmax(-1) != tags) & real
    run_ctx.mark_as_loss(name="err", loss=wrong.sum().float(), as_error=True, custom_inv_norm_factor=real.sum())
