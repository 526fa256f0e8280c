# Corpus bug (om-ai-lab/OmDet#19): nn.MultiheadAttention left at batch_first=False while its input is batch-major,
# so each position attends across the examples of its batch. Task: name the largest token of a sequence.
# Twin: ++bug False.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Tokens(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, 10, size=(2000 if split == "train" else 400, 12))
        super().__init__({"data": x, "classes": x.max(axis=1)}, sparse_dims={"data": 10, "classes": 10}, **kwargs)


train = {"class": Tokens, "split": "train"}
dev = {"class": Tokens, "split": "dev"}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 10},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class MaxToken(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=not bug)
        self.out = nn.Linear(32, 10)

    def forward(self, tokens):
        h = self.embed(tokens)
        mixed, _ = self.attn(h, h, h)
        return self.out(mixed.mean(dim=1))


def get_model(**_kwargs):
    return MaxToken()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
