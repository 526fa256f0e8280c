# Healthy corpus: ALiBi (Press et al. 2022): a transformer with no position embeddings at all; each attention head
# adds a fixed penalty proportional to the distance between query and key (slopes 1/2, 1/4, 1/8, 1/16) to its causal
# attention scores, and that is the only way positions enter. Task: whether marker token A occurs before marker token
# B in a sequence of 20 tokens, read at the last position.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, HEADS, WIDTH, A, B = 12, 20, 4, 64, 1, 2
SLOPES = torch.tensor([2.0 ** -(i + 1) for i in range(HEADS)])


class Orders(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        x = rng.integers(3, VOCAB, size=(n, LENGTH))
        labels = np.zeros(n, dtype=np.int64)
        for row in range(n):
            first, second = rng.choice(LENGTH, size=2, replace=False)
            x[row, first], x[row, second] = A, B
            labels[row] = int(first < second)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


class AlibiBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH))

    def forward(self, x):
        batch, length, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        positions = torch.arange(length, device=x.device)
        distance = (positions[None, :] - positions[:, None]).clamp(max=0).float()  # -(i - j) for keys j <= i
        bias = SLOPES.to(x.device)[:, None, None] * distance[None]
        causal = positions[None, :] > positions[:, None]
        scores = q @ k.transpose(-1, -2) / (WIDTH // HEADS) ** 0.5 + bias
        weights = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(batch, length, WIDTH))
        return x + self.mlp(self.norm2(x))


class AlibiClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)  # no position embedding
        self.blocks = nn.Sequential(AlibiBlock(), AlibiBlock())
        self.out = nn.Linear(WIDTH, 2)

    def forward(self, tokens):
        return self.out(self.blocks(self.embed(tokens))[:, -1])


train = {"class": Orders, "split": "train"}
dev = {"class": Orders, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return AlibiClassifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
