# Corpus bug (mlfoundations/open_clip#573): the transformer blocks are wrapped in torch.utils.checkpoint.checkpoint
# with the reentrant variant; when a checkpointed block's input needs no gradient (it comes from frozen layers), the
# reentrant variant returns an output without a gradient path to the block's parameters, which get no gradient at all
# (torch warns "None of the inputs have requires_grad=True. Gradients will be None"); use_reentrant=False "increased
# performance". Task: fine-tuning on top of frozen pretrained token embeddings (frozen on purpose) two
# nn.TransformerEncoderLayer blocks, each run through activation checkpointing, and a classifier on the mean of the
# outputs; the class is whether symbol A occurs before symbol B in the sequence (order, which the blocks must
# compute: a mean of embeddings cannot). Twin: ++bug False (use_reentrant=False).
import numpy as np
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH, WIDTH, A, B = 12, 16, 32, 0, 1
EMBEDDINGS = torch.from_numpy(np.random.default_rng(43).normal(size=(VOCAB, WIDTH)).astype(np.float32))


class Ordered(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        x = rng.integers(2, VOCAB, size=(n, LENGTH))
        first, second = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for row in range(n):
            first[row], second[row] = rng.choice(LENGTH, size=2, replace=False)
        x[np.arange(n), first], x[np.arange(n), second] = A, B
        labels = (first < second).astype(np.int64)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Ordered, "split": "train"}
dev = {"class": Ordered, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


class CheckpointedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(EMBEDDINGS, freeze=True)  # frozen on purpose
        self.pos = nn.Embedding.from_pretrained(
            0.5 * torch.randn(LENGTH, WIDTH, generator=torch.Generator().manual_seed(44))
        )
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, 4, 64, dropout=0.0, batch_first=True) for _ in range(2)
        )
        self.head = nn.Linear(WIDTH, 2)

    def forward(self, x):
        h = self.embed(x) + self.pos.weight[None]
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=bug) if self.training else block(h)
        return self.head(h.mean(1))


def get_model(**_kwargs):
    return CheckpointedEncoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
