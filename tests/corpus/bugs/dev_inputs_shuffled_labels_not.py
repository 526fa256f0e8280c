# Corpus bug (dennybritz/cnn-text-classification-tf#136): the evaluation code shuffles the test examples with a
# permutation but keeps the labels in their original order, so each prediction is scored against another example's
# label. Task: sentiment of 20-token texts (vocabulary of 200 words; 2 to 4 positive or negative cue words among
# neutral ones), a CNN over word embeddings with max-pooling (Kim's architecture). Twin: ++bug False (the dev texts
# and labels stay paired).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH = 200, 20
POSITIVE, NEGATIVE = np.arange(2, 22), np.arange(22, 42)


class Sentiment(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 1000
        labels = rng.integers(0, 2, size=n)
        texts = rng.integers(42, VOCAB, size=(n, LENGTH))
        for i, label in enumerate(labels):
            cues = rng.integers(2, 5)
            mine = POSITIVE if label == 1 else NEGATIVE
            texts[i, rng.choice(LENGTH, size=cues, replace=False)] = rng.choice(mine, size=cues)
        if split == "dev" and bug:  # the evaluation script's shuffle, applied to the texts only
            texts = texts[rng.permutation(n)]
        super().__init__({"data": texts, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Sentiment, "split": "train"}
dev = {"class": Sentiment, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 50
num_epochs = 3
learning_rate = 2e-3


class TextCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.convs = nn.ModuleList([nn.Conv1d(32, 32, k) for k in (3, 4, 5)])
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(96, 2)

    def forward(self, tokens):
        x = self.embed(tokens).transpose(1, 2)  # [B, 32, T]
        pooled = [torch.relu(conv(x)).amax(-1) for conv in self.convs]
        return self.out(self.dropout(torch.cat(pooled, -1)))


def get_model(**_kwargs):
    return TextCNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
