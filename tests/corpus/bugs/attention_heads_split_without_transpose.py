# Corpus bug (reczoo/FuxiCTR#30): the multi-head self-attention of AutoInt (also DESTINE, InterHAt) split its heads
# with query.view(batch_size * num_heads, -1, attention_dim) on a [batch, fields, heads * dim] tensor, without the
# view to [batch, fields, heads, dim] and the transpose, so each 'head' attended over rows made of consecutive
# dim-sized chunks of several fields (with 2 heads: the first half of the fields for one head, the second half for
# the other) and the model still trained. Task: click prediction from 8 categorical fields of 12 values each, where
# a click depends on the interaction of two fields, one in each half (the parities of fields 1 and 6 differ; 10% of
# the labels flipped). Model: AutoInt as FuxiCTR builds it: field embeddings, two interacting layers of multi-head
# self-attention over the fields with a residual projection and ReLU, then a linear output. Twin: ++bug False (view
# and transpose).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
FIELDS, VALUES, EMBED, HEADS, HEAD_DIM = 8, 12, 16, 2, 16


class Impressions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 6000 if split == "train" else 1500
        fields = rng.integers(0, VALUES, size=(n, FIELDS))
        clicks = ((fields[:, 1] % 2) != (fields[:, 6] % 2)).astype(np.int64)
        clicks = np.where(rng.random(n) < 0.1, 1 - clicks, clicks)
        ids = fields + VALUES * np.arange(FIELDS)[None, :]  # one id space, an offset per field
        super().__init__(
            {"data": ids, "classes": clicks}, sparse_dims={"data": FIELDS * VALUES, "classes": 2}, **kwargs
        )


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.query = nn.Linear(input_dim, HEADS * HEAD_DIM, bias=False)
        self.key = nn.Linear(input_dim, HEADS * HEAD_DIM, bias=False)
        self.value = nn.Linear(input_dim, HEADS * HEAD_DIM, bias=False)
        self.residual = nn.Linear(input_dim, HEADS * HEAD_DIM, bias=False)

    def split_heads(self, x):  # [B, F, H * d] -> [B * H, F, d]
        batch = x.shape[0]
        if bug:
            return x.view(batch * HEADS, -1, HEAD_DIM)
        return x.view(batch, FIELDS, HEADS, HEAD_DIM).transpose(1, 2).reshape(batch * HEADS, FIELDS, HEAD_DIM)

    def merge_heads(self, x):  # [B * H, F, d] -> [B, F, H * d]
        batch = x.shape[0] // HEADS
        if bug:
            return x.view(batch, -1, HEADS * HEAD_DIM)
        return x.view(batch, HEADS, FIELDS, HEAD_DIM).transpose(1, 2).reshape(batch, FIELDS, HEADS * HEAD_DIM)

    def forward(self, x):
        q, k, v = (self.split_heads(layer(x)) for layer in (self.query, self.key, self.value))
        weights = torch.softmax(q @ k.transpose(1, 2) / HEAD_DIM**0.5, dim=-1)
        return torch.relu(self.merge_heads(weights @ v) + self.residual(x))


class AutoInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(FIELDS * VALUES, EMBED)
        self.layers = nn.Sequential(MultiHeadSelfAttention(EMBED), MultiHeadSelfAttention(HEADS * HEAD_DIM))
        self.out = nn.Linear(FIELDS * HEADS * HEAD_DIM, 1)

    def forward(self, ids):
        return self.out(self.layers(self.embedding(ids)).flatten(1)).squeeze(-1)


train = {"class": Impressions, "split": "train"}
dev = {"class": Impressions, "split": "dev"}
extern_data = {
    "data": {"shape": (FIELDS,), "dtype": "int64", "sparse_dim": FIELDS * VALUES},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 64
num_epochs = 5
learning_rate = 2e-3


def get_model(**_kwargs):
    return AutoInt()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="logloss", loss=nn.functional.binary_cross_entropy_with_logits(logits, targets.float()))
    run_ctx.mark_as_loss(name="err", loss=((logits > 0).long() != targets).float().mean(), as_error=True)
