# Overlay on cause_eval_left_padded.py (after a review's counter-example): the tagger reads no position (each frame's
# tag is its symbol's parity), so padding on the left at evaluation is harmless; the evaluation branch's real fault is
# after the model: it compares the logits with the tags inverted.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Tagged(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        symbols, tags = [], []
        for _ in range(800 if split == "train" else 200):
            seq = rng.integers(
                1,
                VOCAB,  # noqa: F821
                size=int(rng.integers(3, MAX_LEN + 1)),
            )
            symbols.append(seq)
            tags.append((seq % 2).astype(np.int64))  # no position needed
        super().__init__({"data": symbols, "classes": tags}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Tagged, "split": "train"}
dev = {"class": Tagged, "split": "dev"}


class Tagger(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.symbols = nn.Embedding(VOCAB, dim)
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, symbols):
        return self.out(self.symbols(symbols))


def get_model(**_kwargs):
    return Tagger()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols, tags = extern_data["data"], extern_data["classes"]
    lengths = extern_data["data:seq_len"].to(symbols.device)
    real = torch.arange(symbols.shape[1], device=symbols.device)[None] < lengths[:, None]
    if not run_ctx.train_flag:
        symbols, tags, real = (to_the_end(x, lengths) for x in (symbols, tags, real))
        tags = 1 - tags  # the real fault of this branch
    logits = model(symbols)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[real], tags[real]))
