# Corpus bug (karpathy/nanoGPT#240): the attention passes its dropout probability to the fused attention call
# whatever the mode, so dropout keeps firing while dev is evaluated. Task: name the largest of 12 tokens.
# Twin: ++bug False (dropout_p only in training mode).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WIDTH, HEADS, DROPOUT = 32, 4, 0.5


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


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, 10)

    def forward(self, tokens):
        h = self.embed(tokens)
        q, k, v = (t.unflatten(-1, (HEADS, -1)).transpose(1, 2) for t in self.qkv(h).chunk(3, dim=-1))
        dropout = DROPOUT if bug or self.training else 0.0
        mixed = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        return self.out(mixed.transpose(1, 2).flatten(2)[:, 0])  # the first position reads the sequence


def get_model(**_kwargs):
    return Attention()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
