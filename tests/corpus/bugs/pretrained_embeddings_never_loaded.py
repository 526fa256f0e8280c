# Corpus bug (fenchri/edge-oriented-graph#12): nn.Embedding.from_pretrained is a class method; called on the model's
# embedding layer its result is discarded, and the model trains from random word vectors. Task: the sentiment of a
# 6-word sentence over a 400-word vocabulary from only 300 training sentences, with pretrained vectors that carry
# each word's polarity. Twin: ++bug False (the returned layer is assigned).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, WIDTH = 400, 16
POLARITY = np.random.default_rng(2).choice([-1.0, 1.0], size=VOCAB)
VECTORS = torch.from_numpy(
    (np.random.default_rng(3).normal(size=(VOCAB, WIDTH)) * 0.3 + POLARITY[:, None] * 0.5).astype(np.float32)
)


class Sentences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        words = rng.integers(0, VOCAB, size=(300 if split == "train" else 600, 6))
        labels = (POLARITY[words].sum(1) > 0).astype(np.int64)
        super().__init__({"data": words, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Sentences, "split": "train"}
dev = {"class": Sentences, "split": "dev"}
extern_data = {
    "data": {"shape": (6,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


class BagOfVectors(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        if bug:
            self.embed.from_pretrained(VECTORS, freeze=False)
        else:
            self.embed = nn.Embedding.from_pretrained(VECTORS, freeze=False)
        self.out = nn.Linear(WIDTH, 2)

    def forward(self, words):
        return self.out(self.embed(words).mean(1))


def get_model(**_kwargs):
    return BagOfVectors()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
