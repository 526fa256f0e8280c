# Corpus bug (ilivans/tf-rnn-attention#3): the model outputs logits (the loss is sigmoid cross-entropy with logits),
# but the accuracy compares tf.round(y_hat) with the 0/1 targets; a rounded logit equals the target only when the logit
# lies in [-0.5, 0.5) or [0.5, 1.5), so confident correct predictions count as errors and the reported accuracy is far
# below the model's. Task: the repository's toy example in small: binary sentiment of token sequences (a few positive
# and negative words among neutral ones), an embedding, a GRU and additive attention pooling, trained by
# BCEWithLogitsLoss. The reported dev error is 1 - that accuracy. Twin: ++bug False (round(sigmoid(y_hat))).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH = 40, 20
POSITIVE, NEGATIVE = np.arange(0, 5), np.arange(5, 10)


class Reviews(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        x = rng.integers(10, VOCAB, size=(n, LENGTH))
        labels = rng.integers(0, 2, size=n)
        for row, label in enumerate(labels):
            slots = rng.choice(LENGTH, size=3, replace=False)
            x[row, slots] = rng.choice(POSITIVE if label else NEGATIVE, size=3)
        super().__init__({"data": x, "target": labels.astype(np.float32)}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Reviews, "split": "train"}
dev = {"class": Reviews, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "target": {"shape": (), "dtype": "float32"},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class AttentionRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.gru = nn.GRU(32, 32, batch_first=True)
        self.score = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1, bias=False))
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        h, _ = self.gru(self.embed(x))
        alpha = self.score(h).softmax(dim=1)
        return self.out((alpha * h).sum(1)).squeeze(-1)


def get_model(**_kwargs):
    return AttentionRNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    y_hat = model(extern_data["data"])
    target = extern_data["target"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(y_hat, target))
    predicted = torch.round(y_hat) if bug else torch.round(torch.sigmoid(y_hat))
    run_ctx.mark_as_loss(name="err", loss=1.0 - (predicted == target).float().mean(), as_error=True)
