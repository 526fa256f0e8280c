# Healthy corpus: a dev set intentionally harder than training, for length generalisation (as the Chomsky-hierarchy
# benchmark trains on short and tests on longer sequences): a GRU reads bit sequences and says at every step whether
# it has seen an odd number of ones so far (parity); training sequences have 5 to 20 steps, dev sequences 21 to 40.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


class Parity(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        low, high = (5, 20) if split == "train" else (21, 40)
        bits, labels = [], []
        for _ in range(4000 if split == "train" else 500):
            seq = rng.integers(0, 2, size=int(rng.integers(low, high + 1)))
            bits.append(seq.astype(np.int64))
            labels.append((np.cumsum(seq) % 2).astype(np.int64))
        super().__init__({"data": bits, "classes": labels}, sparse_dims={"data": 2, "classes": 2}, **kwargs)


train = {"class": Parity, "split": "train"}
dev = {"class": Parity, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 1000
max_seqs = 50
num_epochs = 5
learning_rate = 3e-3


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(2, 16)
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, bits):
        return self.out(self.gru(self.embed(bits))[0])


def get_model(**_kwargs):
    return Tagger()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    bits, targets = extern_data["data"], extern_data["classes"]
    lengths = extern_data["data:seq_len"].to(bits.device)
    real = torch.arange(bits.shape[1], device=bits.device)[None] < lengths[:, None]
    logits = model(bits)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[real], targets[real]))
    wrong = (logits.argmax(-1) != targets) & real
    run_ctx.mark_as_loss(name="err", loss=wrong.sum().float(), as_error=True, custom_inv_norm_factor=real.sum())
